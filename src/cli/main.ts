// `kpng`: wires a source (file, kube, local) to a sink (routes, dump, trace, nft, api).
import { compileCache } from './early';
import { ClusterStore } from '../store/cluster';
import { NodeState } from '../store/node-state';
import type { ItemStore } from '../store/item-store';
import { FileSource } from '../source/file-source';
import * as path from 'node:path';
import type { Sink } from '../sink/sink';
import { registerBuiltinBackends } from '../backend/builtin';
import { getBackend, listBackends, type BackendDefinition } from '../backend/registry';
import { runSink } from '../runner';
import { startStats } from '../stats';
import { createLogger, type Logger } from '../util/log';
import { parseCli, pluginArgs, UsageError, type CliOptions } from './args';
import { commandHelp, helpText } from './help';
import { commandSpec } from './spec';
import { loadPlugin, type ApiClientModule, type ApiServerModule, type KubeSourceModule, type KubeTarget } from './plugins';
import { kubeProxyFlagsHelp, resolveKubeProxyArgs, type KubeProxyArgs } from './kube-proxy-flags';
import { OpsServers } from './ops';
import { servesLocalhostNodePorts } from '../model/options';
import { runMigrateCheck } from './migrate-check';
import { writeConfiguration } from './config-output';
import { buildInfo, rawVersion } from '../metrics/build-info';
import { removeKubeProxyRules, runCleanup, TAKEOVER_RECHECKS_MS } from './takeover';
import { limitYoungGeneration, promoteWholePagesOnLargeHeaps, reduceMemoryWhenIdle } from '../util/memory';
import { flushCompileCache } from '../util/compile-cache';
import { enableMaglev, enableOptimizingCompilers, optimizeWhenBusy, optimizingCompilersDeferred, type JitPolicy } from '../util/jit';
import { ARENA_MAX, fixMallocThresholds, limitMallocArenas, MALLOC_THRESHOLD, trimMallocEvery } from '../native/malloc';

/** `kpng local --once`: attempts to reach the server before giving up (backoff from 200 ms: ~6 s in all). */
const ONCE_ATTEMPTS = 5;
const out = (text: string) => { process.stdout.write(text); };

async function createSink(def: BackendDefinition, opts: CliOptions, log: Logger): Promise<Sink> {
  return def.create({ node: opts.node, log, flags: opts.backendFlags });
}

/** Loads --plugin modules (paths are relative to the working directory); each registers backends. */
function loadPlugins(argv: string[]): void {
  for (const mod of pluginArgs(argv)) {
    const target = mod.startsWith('.') || mod.startsWith('/') ? path.resolve(mod) : mod;
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      require(target);
    } catch (e) {
      throw new UsageError(`--plugin ${mod}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
}

/** Resolves on SIGINT/SIGTERM (or when the returned controller is aborted). */
function stopSignal(): AbortController {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  ac.signal.addEventListener('abort', () => { process.off('SIGINT', stop); process.off('SIGTERM', stop); });
  return ac;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const version = (): string => (require('../../../package.json') as { version: string }).version;

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'publish' || argv[0] === 'aggregator') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const cmd = require('./publish') as typeof import('./publish');
    const ac = stopSignal();
    try { return await cmd.runAggregatorCommand(argv, out, ac.signal); } finally { ac.abort(); }
  }
  let opts: CliOptions;
  let kp: KubeProxyArgs;
  try {
    registerBuiltinBackends();
    loadPlugins(argv);
    kp = resolveKubeProxyArgs(argv, { registered: listBackends().map((d) => d.name), invokedAs: process.argv[1] });
    opts = parseCli(kp.argv);
    // Alone it would start a proxy: it only narrows what --cleanup removes.
    if (opts.cleanupOnly !== undefined && kp.action !== 'cleanup') throw new UsageError(`--cleanup-only ${opts.cleanupOnly} narrows --cleanup, which was not given: add --cleanup to remove ${opts.cleanupOnly === 'kpng' ? "kpng's" : "kube-proxy's"} rules and exit`);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`kpng: ${e.message}\nRun 'kpng --help' for usage.\n`);
    return 2;
  }
  if (opts.command === 'help') {
    const topic = opts.helpTopic;
    out(topic === 'kube-proxy' ? kubeProxyFlagsHelp() : topic ? commandHelp(commandSpec(topic)!) : helpText());
    return 0;
  }
  if (opts.command === 'version') {
    out(kp.action === 'version-raw' ? `${rawVersion(buildInfo(version()))}\n` : `kpng ${version()} (node ${process.version})\n`);
    return 0;
  }
  const log = createLogger({ level: opts.logLevel, format: opts.logFormat });
  if (kp.action === 'write-config') return writeConfiguration(kp.writeConfigTo!, kp.configuration, log);
  if (kp.action === 'cleanup') {
    for (const w of kp.warnings) log.warn(w);
    const which = opts.cleanupOnly === 'kpng' ? 'kpng' : opts.cleanupOnly === 'kube-proxy' ? 'upstream' : 'all';
    return runCleanup({ which, flags: opts.backendFlags, ipvsExcludeCIDRs: kp.ipvs.excludeCIDRs }, log);
  }
  if (opts.command === 'migrate-check') {
    return runMigrateCheck({
      node: opts.node, configuration: kp.configuration, source: kp.ops.configFile ? `--config ${kp.ops.configFile}` : 'the command line',
      backend: opts.to, model: opts.model, conntrack: kp.ops.conntrack !== null, warnings: kp.warnings,
    }, out);
  }
  if (kp.action === 'init-only') {
    // What needs full privileges, then exit: a second run can then do with CAP_NET_ADMIN alone.
    for (const w of kp.warnings) log.warn(w);
    await new OpsServers(kp.ops, { node: opts.node, backend: getBackend(opts.to) ?? { name: opts.to }, syncPeriodMs: opts.syncPeriodMs, once: true, log, version: version(), routeLocalnet: servesLocalhostNodePorts(opts.model) }).start();
    if (opts.to === 'ipvs') {
      // kube-proxy's IPVS proxier sets its sysctls, strict ARP and the timeouts before it returns for --init-only.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const ipvs = require('../backend/ipvs/index') as typeof import('../backend/ipvs/index');
      let settings;
      try { settings = ipvs.ipvsSettings(opts.backendFlags); } catch (e) { log.error((e as Error).message); return 1; }
      await ipvs.applyIpvsKernelSettings(settings, {}, (m) => log.info(m));
    }
    log.info('init-only: privileged settings applied; exiting');
    return 0;
  }
  const ac = stopSignal();
  const stops: (() => Promise<void> | void)[] = [];
  // The first state is built with nearly every allocation surviving: keep V8's young generation
  // from growing to its maximum for it (that growth would raise the peak resident set).
  if (limitYoungGeneration()) log.debug('memory: V8 young generation kept at its initial size (--semi-space-growth-factor=1)');
  // A major GC's atomic pause on a large heap is mostly the copying of young objects (memory.ts).
  const stopPromotion = promoteWholePagesOnLargeHeaps((p, used) => log.debug(`memory: heap ${(used / 2 ** 20).toFixed(0)} MiB after a major GC: ${p === 'whole-pages' ? 'young pages promoted whole' : "V8's default page promotion"}`));
  if (stopPromotion) stops.push(stopPromotion);
  // Before the sources and backends start threads that allocate.
  const arenas = limitMallocArenas();
  log.debug(arenas === 'set' ? `memory: malloc arenas capped at ${ARENA_MAX}` : arenas === 'user' ? 'memory: malloc arenas as MALLOC_ARENA_MAX says' : 'memory: malloc arenas not capped (no addon or no glibc)');
  if (arenas !== 'unavailable' && !opts.once) trimMallocEvery(5000, ac.signal);
  const thresholds = fixMallocThresholds();
  if (thresholds !== 'unavailable') log.debug(`memory: malloc's mmap and trim thresholds ${thresholds === 'set' ? `fixed at ${MALLOC_THRESHOLD} bytes` : 'as the environment says'}`);
  if (compileCache) log.debug(compileCache.enabled ? `compile cache: ${compileCache.directory}` : `compile cache: off (${compileCache.reason}${compileCache.directory ? `: ${compileCache.directory}` : ''})`);
  // early.ts deferred V8's optimizing compilers unless --jit on or --to api (the API server fans
  // states out to many nodes: it always wants them).
  let objects = () => 0;
  let jit: JitPolicy | undefined;
  if (optimizingCompilersDeferred()) {
    if (opts.jit === 'on' || opts.to === 'api') enableOptimizingCompilers();
    else {
      log.debug('jit: optimizing compilers off until the cluster or the load needs them, but for Maglev on the hottest code (--jit on: from the start)');
      jit = optimizeWhenBusy({ log, signal: ac.signal, objects: () => objects() });
    }
  }
  try {
    // What runs, first: the line an operator looks for after an upgrade or a crash (a one-shot run's
    // output stays its own).
    const info = buildInfo(version());
    (opts.once ? log.debug : log.info)(`kpng ${info.git_version}${info.git_commit ? ` (commit ${info.git_commit.slice(0, 12)}${info.git_tree_state === 'dirty' ? ', dirty' : ''}, built ${info.build_date})` : ''} on Node.js ${process.version}: ${opts.command} source, ${opts.to} backend, node ${opts.node}`);
    for (const w of kp.warnings) log.warn(w);
    const ops = new OpsServers(kp.ops, { node: opts.node, backend: getBackend(opts.to) ?? { name: opts.to }, syncPeriodMs: opts.syncPeriodMs, once: opts.once, log, version: version(),
      routeLocalnet: servesLocalhostNodePorts(opts.model), nodeObjects: opts.command !== 'local', ...(kp.kubeProxyStyle ? { configz: () => kp.configuration } : {}),
      // As kube-proxy: the Node object is gone from the API server, so end (exit code 1) and let the pod
      // start again, rather than serve a node that no longer exists. A file or the local API is not a cluster.
      ...(opts.command === 'kube' ? { onNodeDeleted: () => { log.info(`Node ${opts.node} was deleted: exiting, as kube-proxy does`); process.exitCode = 1; ac.abort(); } } : {}) });
    stops.push(() => ops.stop());
    // Where the API server is, read before anything on the node changes (sysctls, ports): a kubeconfig
    // that cannot be read is an error naming it, and the node is left as it was.
    const kube = opts.command === 'kube' ? loadPlugin<KubeSourceModule>('../source/kube', 'the kube source') : undefined;
    let kubeTarget: KubeTarget | undefined;
    try {
      kubeTarget = kube?.loadKubeTarget(opts.kubeconfig, 'kpng', { master: kp.kube.master, observer: ops.metrics.restClient });
    } catch (e) {
      log.error(`cannot reach the API server: ${(e as Error).message}; nothing on the node was changed`);
      return 1;
    }
    await ops.start();
    let state: ItemStore;
    let store: ClusterStore | undefined;
    let events = () => 0;
    if (opts.command === 'local') {
      const client = loadPlugin<ApiClientModule>('../api/client', 'the local (API) source');
      const src = await client.startApiSource({
        api: opts.api!, node: opts.node, log, signal: ac.signal, tlsCert: opts.tlsCert, tlsKey: opts.tlsKey, tlsCA: opts.tlsCA,
        // --once must end: a server that cannot be reached is an error, not a wait without end.
        ...(opts.once ? { giveUpAfterFailures: ONCE_ATTEMPTS, onGiveUp: () => { process.exitCode = 1; ac.abort(); } } : {}),
      });
      stops.push(() => src.stop());
      state = src.state;
      objects = () => src.state.size;
    } else {
      const cluster = (store = new ClusterStore({ log, serviceProxyName: opts.serviceProxyName, model: opts.model, observe: ops.observeObject }));
      events = () => cluster.events;
      objects = () => cluster.serviceCount + cluster.sliceCount;
      // Checked as objects arrive, before the node state computes them: a large first list is
      // then modelled and rendered by optimized code.
      if (jit) { const j = jit; const off = cluster.onChange(() => { if (j.check()) off(); }); }
      if (opts.to === 'api') {
        // The API serves every node: no node state here, and the process runs until stopped.
        const api = loadPlugin<ApiServerModule>('../api/server', 'the API server');
        const server = await api.serveApi({ store: cluster, log, listen: opts.listen ?? 'unix:///run/kpng/kpng.sock', socketGroup: opts.socketGroup, tlsCert: opts.tlsCert, tlsKey: opts.tlsKey, tlsCA: opts.tlsCA, signal: ac.signal });
        stops.push(() => server.close());
        log.info(`serving the ENLS on ${server.address}`);
      }
      if (opts.command === 'file') {
        const file = new FileSource({ file: opts.input!, store: cluster, log });
        await file.start(!opts.once);
        stops.push(() => file.stop());
        if (!opts.once && opts.to === 'api') reduceMemoryWhenIdle(log, ac.signal);
      } else {
        // With a sink, the memory-reducing GC waits for the first sync (onApplied below).
        const src = await kube!.startKubeSource({ store: cluster, target: kubeTarget, log, kubeconfig: opts.kubeconfig, node: opts.node, serviceProxyName: opts.serviceProxyName, signal: ac.signal, reduceMemoryWhenSynced: opts.to === 'api', contentType: opts.kubeContentType,
          master: kp.kube.master, qps: kp.kube.qps, burst: kp.kube.burst, observeRequests: ops.metrics.restClient, observeWatches: ops.metrics.kubeWatch });
        stops.push(() => src.stop());
      }
      if (opts.to === 'api') {
        if (opts.stats) stops.push(startStats({ events, revision: () => 0 }, (l) => process.stderr.write(l + '\n')));
        await new Promise<void>((r) => ac.signal.addEventListener('abort', () => r(), { once: true }));
        return 0;
      }
      state = new NodeState(cluster, opts.node);
    }
    const def = getBackend(opts.to)!;
    const sink = ops.attach(state, await createSink(def, opts, log), store);
    stops.push(() => sink.close?.());
    if (opts.stats) stops.push(startStats({ events, revision: () => state.revision }, (l) => process.stderr.write(l + '\n')));
    let cacheFlushed = false, firstApplied = false;
    let takeover: Promise<void> | undefined;
    const result = await runSink(state, sink, {
      log,
      minSyncPeriodMs: opts.once ? 0 : opts.minSyncPeriodMs,
      minChangePeriodMs: opts.once ? 0 : opts.minChangePeriodMs,
      burst: opts.syncBurst,
      once: opts.once,
      fullSyncPeriodMs: def.kernel && !opts.once ? opts.syncPeriodMs : 0,
      onApplied: (b, ms) => {
        log.debug(`${sink.name}: synced revision ${b.revision} (${b.changes.length} changes${b.reset ? ', full' : ''}) in ${ms.toFixed(1)} ms`);
        // Every module of the steady state is loaded by the first sync: keep their bytecode for
        // the next start now (node would write it only at a clean exit).
        if (!cacheFlushed && compileCache?.enabled) { cacheFlushed = true; flushCompileCache(); }
        // One memory-reducing GC once idle after the first sync (the lists' garbage is gone then);
        // started earlier, it could land inside that sync.
        // kpng's rules now serve the node: kube-proxy's (if it ran here) can go.
        if (!takeover && def.kernel) takeover = removeKubeProxyRules(opts.to, opts.backendFlags, log, opts.once ? {} : { signal: ac.signal, rechecksMs: TAKEOVER_RECHECKS_MS });
        if (!firstApplied && !opts.once) {
          firstApplied = true;
          reduceMemoryWhenIdle(log, ac.signal, () => { if (enableMaglev()) log.debug('jit: Maglev on for the steady state, with its own thresholds (TurboFan when the cluster or the load needs it)'); });
        }
      },
    }, ac.signal);
    await takeover;
    if (opts.once && result.syncs === 0) {
      log.error(`${sink.name}: no successful sync`);
      return 1;
    }
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`kpng: ${e.message}\n`);
      return 2;
    }
    log.error((e as Error).message);
    return 1;
  } finally {
    ac.abort();
    for (const s of stops.reverse()) {
      try { await s(); } catch (e) { log.warn(`while stopping: ${(e as Error).message}`); }
    }
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code || process.exitCode; }, (e) => {
    process.stderr.write(`kpng: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  });
}

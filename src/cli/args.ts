// Command-line options of `kpng`, their parsing and the --help text.
import { parseArgs } from 'node:util';
import os from 'node:os';
import { backendsHelp, getBackend, listBackends, type FlagValue } from '../backend/registry';
import { modelOptions, OptionError, type ModelOptions } from '../model/options';
import { JIT_CPU_SHARE, JIT_MODES, JIT_OBJECTS, type JitMode } from '../util/jit';
import { contentTypeOf, PROTOBUF, type ContentType } from '../source/kube/protobuf';
import { DEBUG_VERBOSITY, LOG_FORMATS, type LogFormat } from '../util/log';

export const COMMANDS = ['file', 'kube', 'local', 'help', 'version'] as const;
export type Command = (typeof COMMANDS)[number];
/** A registered backend's name, or 'api' (serve every node's state: not a node backend). */
export type SinkName = string;

export interface CliOptions {
  command: Command;
  node: string;
  to: SinkName;
  format: string | undefined;
  once: boolean;
  stats: boolean;
  minSyncPeriodMs: number;
  syncBurst: number;
  /** --detect-local-mode and its flags, --masquerade-all, --nodeport-addresses, --bind-address, validated. */
  model: ModelOptions;
  /** Full resync period of kernel backends, ms. */
  syncPeriodMs: number;
  /** The chosen backend's own flags. */
  backendFlags: Record<string, FlagValue>;
  /** Modules loaded with --plugin (they register backends). */
  plugins: string[];
  serviceProxyName: string;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** --cleanup-only: what `--cleanup` removes (default both kpng's and kube-proxy's). */
  cleanupOnly: 'kpng' | 'kube-proxy' | undefined;
  /** --logging-format: klog's text (default) or component-base's JSON. */
  logFormat: LogFormat;
  /** adaptive: V8's optimizing compilers only once the cluster is large or the process busy (util/jit.ts). */
  jit: JitMode;
  input?: string;
  kubeconfig?: string;
  /** What the kube source asks the API server for (--kube-api-content-type). */
  kubeContentType: ContentType;
  api?: string;
  listen?: string;
  socketGroup?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsCA?: string;
}

export class UsageError extends Error {}

export function helpText(): string {
  return `kpng: a Kubernetes service proxy built around the expected node-local state (ENLS).

Usage:
  kpng file  --input FILE [--node NAME] [--to SINK] [options]   read a kubectl dump, follow its changes
  kpng kube  [--kubeconfig PATH] [--node NAME] [--to SINK] [options]   watch an API server
  kpng local --api unix:///run/kpng/kpng.sock --node NAME [--to SINK]   consume another kpng's state
  kpng publish --producer NAME --file OBJECTS.yaml [--aggregator unix:///PATH] [--once]
                            hand nftables objects to a kpng running --to nft --aggregator --aggregator-listen
  kpng aggregator remove PRODUCER | status [--aggregator unix:///PATH]
  kpng help | --help        this text
  kpng version | --version

Sources:
  file     FILE holds what \`kubectl get nodes,services,endpointslices -A -o yaml\` (or -o json)
           prints: a List or a multi-document YAML stream. kpng reloads it when it is rewritten
           or replaced (renamed over), without restarting.
  kube     Services, EndpointSlices (discovery.k8s.io/v1) and this node's Node object from the
           API server (kubeconfig, $KUBECONFIG, ~/.kube/config, or in-cluster service account).
  local    the ENLS served by \`kpng ... --to api\` in another process.

Backends (--to, default routes; registered: ${listBackends().map((d) => d.name).join(', ')}):
${backendsHelp([{ name: 'api', summary: 'serve every node\'s state over gRPC (--listen)' }])}
  routes --format jsonl prints one object per service port:
           {"service":"ns/name","protocol":"TCP","port":80,"internal":["10.0.0.1:8080"],"external":[]}

Options:
  --node NAME, --hostname-override NAME
                        the node whose state is computed (default: this host's name, ${os.hostname()})
  --once                compute, emit one sync and exit (kpng local: exit 1 if the server cannot be
                        reached after 5 attempts, ~6 s)
  --stats               print "stats: time events rev usr-cpu sys-cpu tot-cpu mem revs/events"
                        on stderr once a second (ms, counts, CPU ms in the interval, % of one
                        core, MiB of resident memory, % of events that changed the state)
  --min-sync-period D   minimum time between two syncs of the sink, e.g. 1s, 250ms, 0 (default 1s)
  --sync-burst N        syncs allowed back to back before the minimum period applies (default 2)
  --service-proxy-name NAME
                        also proxy services labelled service.kubernetes.io/service-proxy-name=NAME
                        (services with another name are always left alone)
  --log-level LEVEL     debug | info | warn | error (default info); logs go to stderr
  --cleanup-only kpng|kube-proxy
                        with --cleanup: remove only kpng's rules (migrating back to kube-proxy) or only
                        kube-proxy's (default: both)
  --logging-format FMT  text (klog's lines, default) or json (one object a line, as kube-proxy's
                        JSON logger writes them)
  --vmodule PATTERN=N,...
                        klog's per-file verbosity, accepted for kube-proxy's command lines: kpng has
                        no source files to match, so the highest N applies to every message
                        (${DEBUG_VERBOSITY} and more: debug) unless --log-level is given
  --jit adaptive|on     V8's optimizing compilers: adaptive (default) runs Maglev on the hottest code
                        only until the first sync is done, Maglev alone after it, and both once the
                        cluster has ${JIT_OBJECTS} Services + EndpointSlices or kpng uses ${JIT_CPU_SHARE * 100}% of a core
                        for 30 s (below that TurboFan costs more memory than it saves CPU); on: both
                        from the start.
                        --to api always runs with them
 the model (these change the ENLS every backend renders):
  --detect-local-mode ClusterCIDR|NodeCIDR|BridgeInterface|InterfaceNamePrefix
                        how pod traffic is told apart (pods are not masqueraded to cluster IPs and
                        are short-circuited to externalTrafficPolicy Local services): sources in
                        --cluster-cidr (default), sources in this Node's spec.podCIDRs, packets in on
                        --pod-bridge-interface, or on interfaces named --pod-interface-name-prefix*
  --cluster-cidr CIDR   the pod network, one CIDR or a dual-stack pair (repeatable or comma
                        separated; ClusterCIDR mode only); without it pods are clients like any other
  --pod-bridge-interface NAME
  --pod-interface-name-prefix PREFIX
                        the interface(s) pods' packets arrive on (BridgeInterface, InterfaceNamePrefix)
  --masquerade-all      masquerade all traffic to cluster IPs
  --nodeport-addresses primary|localhost|all|CIDR,...
                        where node ports answer: this node's addresses inside the CIDRs; primary (the
                        default): the node's primary addresses; all: 0.0.0.0/0 and ::/0; localhost:
                        127.0.0.0/8 and ::1/128, where node ports are never served (as kube-proxy's
                        nftables mode). A family without any answers on every address
  --bind-address IP     this node's primary address of its family, instead of the Node object's
                        (0.0.0.0 or ::, the default: the Node object's)
 kernel backends:
  --sync-period D       full resync period; also repairs rules edited behind kpng's back (default 1h)
  --plugin MODULE       load a module that registers more backends (repeatable; see examples/)
 api sink / local source:
  --listen URL          unix:///run/kpng/kpng.sock (default; mode 0600) or tcp://HOST:PORT (needs
                        --tls-cert and --tls-key; client certificates are verified with --tls-ca)
  --socket-group GROUP  make the unix socket 0660 and owned by GROUP
  --api URL             the server to read from (local source)
  --tls-cert/--tls-key/--tls-ca FILE
  --kubeconfig PATH     kube source: the kubeconfig to use
  --kube-api-content-type TYPE
                        kube source: application/vnd.kubernetes.protobuf (default, as kube-proxy: half
                        the bytes of JSON) or application/json; the server may answer JSON either way
`;
}

/** --kube-api-content-type: kube-proxy's media types (or their short names) to the kube source's encoding. */
export function contentTypeFlag(v: string | undefined): ContentType {
  const t = v?.trim().toLowerCase() ?? '';
  if (t === '' || t === 'protobuf') return 'protobuf';
  if (t === 'json') return 'json';
  const type = contentTypeOf(t);
  if (!type) throw new UsageError(`--kube-api-content-type ${JSON.stringify(v)}: expected ${PROTOBUF} or application/json`);
  return type;
}

/** "1s", "250ms", "2m", "0" or a number of seconds, to milliseconds. */
export function parseDuration(text: string, what: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) throw new UsageError(`${what}: ${JSON.stringify(text)} is not a duration (e.g. 1s, 250ms, 0)`);
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return Math.round(n * ({ ms: 1, s: 1000, m: 60000, h: 3600000 } as const)[unit as 'ms']);
}

/** Values of --plugin, read before parsing (plugins add flags). */
export function pluginArgs(argv: string[]): string[] {
  const out: string[] = [];
  argv.forEach((a, i) => {
    if (a === '--plugin' && argv[i + 1] !== undefined) out.push(argv[i + 1]);
    else if (a.startsWith('--plugin=')) out.push(a.slice('--plugin='.length));
  });
  return out;
}

/** The highest verbosity of a klog --vmodule value ("pattern=N,..."; 0 when absent). */
export function vmoduleVerbosity(text: string | undefined): number {
  let max = 0;
  for (const part of (text ?? '').split(',').filter((p) => p.trim() !== '')) {
    const m = /^([^=]+)=(\d+)$/.exec(part.trim());
    if (!m) throw new UsageError(`--vmodule ${JSON.stringify(text)}: expected PATTERN=N, comma separated`);
    max = Math.max(max, Number(m[2]));
  }
  return max;
}

const list = (v: string[] | undefined): string[] => (v ?? []).flatMap((c) => c.split(',')).map((c) => c.trim()).filter(Boolean);

export function parseCli(argv: string[]): CliOptions {
  const backendOptions: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const d of listBackends()) for (const f of d.flags ?? []) backendOptions[f.name] = { type: f.type, ...(f.multiple ? { multiple: true } : {}) };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        ...backendOptions,
        'nodeport-addresses': { type: 'string', multiple: true },
        'sync-period': { type: 'string' },
        plugin: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean' },
        input: { type: 'string', short: 'i' },
        node: { type: 'string' },
        'hostname-override': { type: 'string' },
        to: { type: 'string' },
        format: { type: 'string' },
        once: { type: 'boolean' },
        stats: { type: 'boolean' },
        'min-sync-period': { type: 'string' },
        'sync-burst': { type: 'string' },
        'cluster-cidr': { type: 'string', multiple: true },
        'masquerade-all': { type: 'boolean' },
        'detect-local-mode': { type: 'string' },
        'pod-bridge-interface': { type: 'string' },
        'pod-interface-name-prefix': { type: 'string' },
        'bind-address': { type: 'string' },
        'service-proxy-name': { type: 'string' },
        'log-level': { type: 'string' },
        'logging-format': { type: 'string' },
        'cleanup-only': { type: 'string' },
        vmodule: { type: 'string' },
        jit: { type: 'string' },
        kubeconfig: { type: 'string' },
        'kube-api-content-type': { type: 'string' },
        api: { type: 'string' },
        listen: { type: 'string' },
        'socket-group': { type: 'string' },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        'tls-ca': { type: 'string' },
      },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const v = parsed.values;
  const first = parsed.positionals[0];
  const command: Command = v.help ? 'help' : v.version ? 'version' : ((first ?? 'help') as Command);
  if (!COMMANDS.includes(command)) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
  if (parsed.positionals.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[1])}`);
  const to = (v.to ?? 'routes') as SinkName;
  const def = getBackend(to);
  if (!def && to !== 'api') throw new UsageError(`--to ${JSON.stringify(v.to)}: expected one of ${[...listBackends().map((d) => d.name), 'api'].join(', ')}`);
  const values = v as Record<string, FlagValue>;
  const backendFlags: Record<string, FlagValue> = { format: v.format };
  for (const d of listBackends()) {
    for (const f of d.flags ?? []) {
      if (d === def) backendFlags[f.name] = values[f.name] ?? f.default;
      else if (values[f.name] !== undefined && !def?.flags?.some((g) => g.name === f.name)) throw new UsageError(`--${f.name} applies to --to ${d.name}, not --to ${to}`);
    }
  }
  let model: ModelOptions;
  try {
    model = modelOptions({
      clusterCIDRs: list(v['cluster-cidr']), masqueradeAll: !!v['masquerade-all'], nodePortAddresses: list(v['nodeport-addresses']),
      detectLocalMode: v['detect-local-mode'], podBridgeInterface: v['pod-bridge-interface'], podInterfaceNamePrefix: v['pod-interface-name-prefix'],
      bindAddress: v['bind-address'],
    });
  } catch (e) {
    if (e instanceof OptionError) throw new UsageError(e.message);
    throw e;
  }
  const formats: Record<string, string[]> = { routes: ['table', 'jsonl'], dump: ['json', 'yaml'] };
  if (v.format !== undefined && !(formats[to] ?? []).includes(v.format)) {
    throw new UsageError(`--format ${JSON.stringify(v.format)} does not apply to --to ${to}${formats[to] ? ` (use ${formats[to].join(' or ')})` : ''}`);
  }
  const logLevel = (v['log-level'] ?? (vmoduleVerbosity(v.vmodule) >= DEBUG_VERBOSITY ? 'debug' : 'info')) as CliOptions['logLevel'];
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel)) throw new UsageError(`--log-level ${JSON.stringify(logLevel)}: expected debug, info, warn or error`);
  const logFormat = (v['logging-format'] ?? 'text') as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) throw new UsageError(`--logging-format ${JSON.stringify(v['logging-format'])}: expected ${LOG_FORMATS.join(' or ')}`);
  const jit = (v.jit ?? 'adaptive') as JitMode;
  if (!JIT_MODES.includes(jit)) throw new UsageError(`--jit ${JSON.stringify(v.jit)}: expected ${JIT_MODES.join(' or ')}`);
  const burst = Number(v['sync-burst'] ?? '2');
  if (!Number.isInteger(burst) || burst < 1) throw new UsageError(`--sync-burst ${JSON.stringify(v['sync-burst'])}: expected a whole number >= 1`);
  const cleanupOnly = v['cleanup-only'] as CliOptions['cleanupOnly'];
  if (cleanupOnly !== undefined && cleanupOnly !== 'kpng' && cleanupOnly !== 'kube-proxy') throw new UsageError(`--cleanup-only ${JSON.stringify(cleanupOnly)}: expected kpng or kube-proxy`);
  if (command === 'file' && !v.input) throw new UsageError('kpng file needs --input FILE');
  if (command === 'local' && !v.api) throw new UsageError('kpng local needs --api URL');
  if (command === 'local' && to === 'api') throw new UsageError('kpng local cannot --to api');
  return {
    command,
    node: v.node ?? v['hostname-override'] ?? os.hostname(),
    to,
    format: v.format,
    once: !!v.once,
    stats: !!v.stats,
    minSyncPeriodMs: parseDuration(v['min-sync-period'] ?? '1s', '--min-sync-period'),
    syncBurst: burst,
    model,
    syncPeriodMs: parseDuration(v['sync-period'] ?? '1h', '--sync-period'),
    backendFlags,
    plugins: v.plugin ?? [],
    serviceProxyName: v['service-proxy-name'] ?? '',
    cleanupOnly,
    logLevel,
    logFormat,
    jit,
    input: v.input,
    kubeconfig: v.kubeconfig,
    kubeContentType: contentTypeFlag(v['kube-api-content-type']),
    api: v.api,
    listen: v.listen,
    socketGroup: v['socket-group'],
    tlsCert: v['tls-cert'],
    tlsKey: v['tls-key'],
    tlsCA: v['tls-ca'],
  };
}

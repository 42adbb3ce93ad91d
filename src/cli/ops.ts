// What an operator replacing kube-proxy needs around the pipeline, wired in one place for main.ts:
// the metrics server, the health server (/healthz, /livez), health-check node ports, node eligibility
// from the Node object, conntrack sysctls and oom_score_adj. main.ts calls startOps() before the source
// starts (its observeObject sees every raw object), then attach() once the node state and the sink exist.
import type { BackendDefinition } from '../backend/registry';
import { applyConntrack, applyOomScoreAdj } from '../config/conntrack';
import { applyRouteLocalnet } from '../config/route-localnet';
import { createHealthzServer } from '../health/healthz-server';
import { nodeEligibilityObserver } from '../health/node-eligibility';
import { ProxyHealth, type IPFamilyName } from '../health/proxy-health';
import { ServiceHealthServer } from '../health/service-health';
import { UpdateTracker } from '../health/update-tracker';
import { ChangeCounters } from '../metrics/change-counters';
import { instrumentSink } from '../metrics/instrumented-sink';
import { buildInfo, registerBuildInfo } from '../metrics/build-info';
import { createMetricsServer } from '../metrics/metrics-server';
import { proxyModeOf } from '../metrics/proxy-mode';
import { NoLocalEndpointsGauge } from '../metrics/no-local-endpoints';
import { ProgrammingLatency, type HashedState } from '../metrics/programming-latency';
import { createProxyMetrics, type ProxyMetrics } from '../metrics/proxy-metrics';
import type { Sink } from '../sink/sink';
import type { ClusterStore, Kind } from '../store/cluster';
import type { ItemStore } from '../store/item-store';
import { parseBindAddress, RetryingServer } from '../util/http-serve';
import type { Logger } from '../util/log';
import type { OpsOptions } from './kube-proxy-flags';

/** kube-proxy's health timeout is twice its sync period (30 s by default). kpng's --sync-period is its
 *  full-resync period (1 h by default), so the timeout is capped at twice kube-proxy's default: a
 *  queued change not applied within a minute means a stuck backend, however rarely kpng resyncs. */
export function healthTimeoutMs(syncPeriodMs: number): number {
  return 2 * Math.min(syncPeriodMs > 0 ? syncPeriodMs : 30000, 30000);
}

/** The families kpng's rules cover: its model is dual-stack and each kernel sync writes both (nft: the ip
 *  and ip6 tables), as upstream's dual-stack proxier has one proxier per family. */
const SERVED_FAMILIES: IPFamilyName[] = ['IPv4', 'IPv6'];

export interface OpsContext {
  node: string;
  backend: Pick<BackendDefinition, 'name' | 'kernel'>;
  syncPeriodMs: number;
  /** One-shot run: no servers. */
  once: boolean;
  /** Whether the source delivers this node's Node object (kube, file; not the local API source). When
   *  it does, the node is not eligible until its Node is seen, as upstream's NodeEligible() answers
   *  false while its node manager holds no Node (kube-proxy started before its Node existed). */
  nodeObjects?: boolean;
  /** Called once when this node's Node object is deleted (kube-proxy then exits, so that its pod
   *  starts again with the node's new identity if the node comes back). */
  onNodeDeleted?: () => void;
  log: Logger;
  version: string;
  /** The effective KubeProxyConfiguration (v1alpha1, with apiVersion and kind) for /configz; without
   *  it, /configz holds what OpsServers knows (configzFallback). */
  configz?: () => unknown;
  /** Localhost node ports are served (--localhost-nodeports with 127.0.0.1 in --nodeport-addresses): set route_localnet. */
  routeLocalnet?: boolean;
}

/** /configz without a full configuration: the fields OpsServers itself was given, in v1alpha1's names. */
export function configzFallback(o: OpsOptions, ctx: Pick<OpsContext, 'node' | 'backend'>): Record<string, unknown> {
  return {
    kind: 'KubeProxyConfiguration',
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    hostnameOverride: ctx.node,
    mode: proxyModeOf(ctx.backend.name),
    metricsBindAddress: o.metricsBindAddress ?? '',
    healthzBindAddress: o.healthzBindAddress ?? '',
    bindAddressHardFail: o.bindAddressHardFail,
  };
}

const nodeName = (raw: unknown): unknown => (typeof raw === 'object' && raw !== null ? (raw as { metadata?: { name?: unknown } }).metadata?.name : undefined);

/** The operator-facing side of a running kpng: the metrics and health servers (/metrics, /healthz, /livez, /configz), the health-check node ports and what they report. */
export class OpsServers {
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
  private readonly servers: RetryingServer[] = [];
  private readonly counters = new ChangeCounters();
  private readonly noLocal = new NoLocalEndpointsGauge();
  private readonly latency: ProgrammingLatency;
  private readonly onNode: (raw: unknown, deleted: boolean) => void;
  private state: ItemStore | undefined;
  private store: ClusterStore | undefined;
  private tracker: UpdateTracker | undefined;
  private hc: ServiceHealthServer | undefined;
  private unlisten: (() => void) | undefined;
  private appliedRevision = -1;
  private nodeDeleted = false;
  private exported = { endpoints: 0, services: 0 };

  constructor(private readonly o: OpsOptions, private readonly ctx: OpsContext) {
    this.metrics = createProxyMetrics();
    this.metrics.info.labels(ctx.version, ctx.backend.name, process.version).set(1);
    registerBuildInfo(this.metrics.registry, buildInfo(ctx.version));
    this.health = new ProxyHealth(healthTimeoutMs(ctx.syncPeriodMs));
    if (ctx.nodeObjects ?? true) this.health.setNodeEligible(false);
    const current = () => this.state;
    const lazy: HashedState = { get revision() { return current()?.revision ?? 0; }, hashOf: (k) => current()?.hashOf(k) };
    this.latency = new ProgrammingLatency(lazy);
    let seen = false;
    this.onNode = nodeEligibilityObserver(ctx.node, (eligible, why) => {
      // Said at info level only when it matters: the node leaves service, or comes back (its Node
      // seen for the first time, eligible, is routine).
      const news = !eligible || (seen && !this.health.nodeEligible);
      seen = true;
      this.health.setNodeEligible(eligible);
      (news ? ctx.log.info : ctx.log.debug)(`healthz: node ${ctx.node} ${eligible ? 'eligible' : 'not eligible'} (${why})`);
    });
  }

  /** Starts the servers and applies process/kernel settings. Throws when a port cannot be bound and
   *  --bind-address-hard-fail is set. */
  async start(): Promise<void> {
    const { log } = this.ctx;
    if (this.o.oomScoreAdj !== undefined) applyOomScoreAdj(this.o.oomScoreAdj, log);
    if (this.o.conntrack && this.ctx.backend.kernel) applyConntrack(this.o.conntrack, log);
    else if (this.o.conntrack) log.debug(`conntrack settings not applied: --to ${this.ctx.backend.name} does not program the kernel`);
    if (this.ctx.routeLocalnet && this.ctx.backend.kernel) applyRouteLocalnet(log);
    if (this.ctx.once) return;
    if (this.o.healthzBindAddress !== null) {
      const server = createHealthzServer(this.health, {
        healthz: (code) => this.metrics.healthzTotal.labels(code).inc(),
        livez: (code) => this.metrics.livezTotal.labels(code).inc(),
      });
      this.servers.push(new RetryingServer('healthz', server, parseBindAddress(this.o.healthzBindAddress, 10256, '--healthz-bind-address'), log));
    }
    if (this.o.metricsBindAddress !== null) {
      const server = createMetricsServer({
        registry: this.metrics.registry,
        proxyMode: proxyModeOf(this.ctx.backend.name),
        configz: this.ctx.configz ?? (() => configzFallback(this.o, this.ctx)),
        beforeScrape: () => this.beforeScrape(),
        slis: this.metrics.slis,
      });
      this.servers.push(new RetryingServer('metrics', server, parseBindAddress(this.o.metricsBindAddress, 10249, '--metrics-bind-address'), log));
    }
    for (const s of this.servers) await s.start(this.o.bindAddressHardFail);
  }

  /** For ClusterStoreOptions.observe: every raw object the source hands over. Never throws. */
  readonly observeObject = (kind: Kind, raw: unknown, deleted: boolean): void => {
    try {
      this.counters.onObject(kind);
      if (kind === 'Node') {
        this.onNode(raw, deleted);
        if (deleted && nodeName(raw) === this.ctx.node && !this.nodeDeleted) { this.nodeDeleted = true; this.ctx.onNodeDeleted?.(); }
      }
      else if (kind === 'EndpointSlice') this.latency.onSlice(raw, deleted);
    } catch (e) {
      this.ctx.log.debug(`ops: ignoring ${kind}: ${(e as Error).message}`);
    }
  };

  /** Follows the node state and wraps the sink; returns the sink the runner must drive. */
  attach(state: ItemStore, sink: Sink, store?: ClusterStore): Sink {
    this.state = state;
    this.store = store;
    // Registered after NodeState's listener: the state is already recomputed when it runs.
    this.unlisten = store?.onChange((c) => {
      this.latency.onFlush(c.services, c.nodes.has(this.ctx.node));
      if (state.revision === this.appliedRevision) this.counters.settled();
    });
    this.tracker = new UpdateTracker(state, (families, revision) => {
      const now = Date.now() / 1000;
      for (const f of families) {
        this.health.queued(f, revision);
        this.metrics.lastQueued.labels(f).set(now);
      }
    });
    this.tracker.start();
    // Upstream's SyncLoop marks each family updated when it starts, "in case Sync() never succeeds":
    // /healthz shows every family from the start, and an update queued then and never applied makes
    // it unhealthy once older than the timeout.
    for (const f of SERVED_FAMILIES) this.health.updated(f, 0);
    if (this.ctx.backend.kernel && !this.ctx.once) {
      this.hc = new ServiceHealthServer({ log: this.ctx.log, proxyHealthy: () => this.health.snapshot().healthy });
    }
    const m = this.metrics;
    const backend = sink.name;
    return instrumentSink(sink, {
      started: () => this.counters.syncStarted(),
      // The applied state stopped working: an update is due, as if a change were queued now, so /healthz
      // turns unhealthy once it is older than the timeout and no sync has repaired it.
      lost: () => {
        m.stateLost.labels(backend).inc();
        const now = Date.now() / 1000;
        for (const f of this.tracker!.families()) {
          this.health.queued(f, state.revision);
          this.metrics.lastQueued.labels(f).set(now);
        }
      },
      failed: () => {
        m.syncs.labels(backend, 'failed', 'any').inc();
        if (proxyModeOf(this.ctx.backend.name) === 'nftables') for (const f of this.tracker!.families()) m.nftablesSyncFailures.labels(f).inc();
      },
      succeeded: (r) => {
        const now = Date.now();
        const rev = r.batch.revision;
        // A sync writes every family's rules (upstream: each family's proxier syncs on every change).
        for (const f of SERVED_FAMILIES) this.health.updated(f, rev);
        for (const f of this.tracker!.families()) {
          m.syncDuration.labels(f).observe(r.seconds);
          (r.full ? m.syncFullDuration : m.syncPartialDuration).labels(f).observe(r.seconds);
          m.lastSync.labels(f).set(now / 1000);
        }
        for (const l of this.latency.onApplied(rev, now)) m.networkProgramming.labels(l.family).observe(l.seconds);
        this.counters.syncSucceeded();
        if (this.appliedRevision === -1 && !this.ctx.once) setImmediate(() => m.registerProcessMetrics()); // the first sync is done
        this.appliedRevision = rev;
        this.noLocal.applyBatch(r.batch, r.state);
        for (const v of this.noLocal.values()) m.noLocalEndpoints.labels(v.family, v.policy).set(v.count);
        m.syncs.labels(backend, 'ok', r.full ? 'full' : 'partial').inc();
        m.batchChanges.labels(backend).observe(r.batch.changes.length);
        m.appliedRevision.labels(backend).set(rev);
        if (r.kernel) {
          m.netlinkMessages.labels(backend).inc(r.kernel.messages);
          m.netlinkBytes.labels(backend).inc(r.kernel.bytes);
          m.kernelDuration.labels(backend).observe(r.kernel.seconds);
        }
        if (r.conntrackDeleted > 0) m.conntrackDeleted.labels(backend).inc(r.conntrackDeleted);
        for (const c of r.conntrack) {
          m.conntrackSyncDuration.labels(c.family).observe(c.seconds);
          m.conntrackDeletedEntries.labels(c.family).inc(c.deleted);
        }
        const hc = this.hc;
        if (hc) void hc.applyBatch(r.batch, r.state).then(() => m.healthCheckPorts.set(hc.ports().size));
      },
    });
  }

  /** Health-check node ports currently open (tests, debugging). */
  healthCheckPorts() { return this.hc?.ports() ?? new Map(); }

  /** Values read from the pipeline rather than pushed by it. */
  private beforeScrape(): void {
    const m = this.metrics;
    m.registerProcessMetrics();
    const c = this.counters.counts;
    m.endpointChangesTotal.inc(c.endpointsTotal - this.exported.endpoints);
    m.serviceChangesTotal.inc(c.servicesTotal - this.exported.services);
    this.exported = { endpoints: c.endpointsTotal, services: c.servicesTotal };
    m.endpointChangesPending.set(c.endpointsPending);
    m.serviceChangesPending.set(c.servicesPending);
    if (this.state) {
      m.revision.set(this.state.revision);
      m.items.set(this.state.size);
    }
    if (this.store) {
      m.events.set(this.store.events);
      m.revsPerEvent.set(this.store.events > 0 && this.state ? this.state.revision / this.store.events : 0);
    }
  }

  async stop(): Promise<void> {
    this.unlisten?.();
    await this.tracker?.stop();
    await this.hc?.close();
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}

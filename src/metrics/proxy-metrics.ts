// Every metric kpng exports, on one prom-client registry: kube-proxy's (pkg/proxy/metrics, same names,
// labels, buckets and meanings, so existing dashboards and alerts keep working) and kpng's own.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, exponentialBuckets, linearBuckets } from './prom';
import { registerFeatureGates } from './feature-gates';
import { registerLinkedApiserverMetrics } from './linked-apiserver';
import { registerMetaMetrics } from './meta';
import { createRestClientMetrics } from './rest-client';
import type { WatchObserver } from '../source/kube/reflector';
import { createSliMetrics } from './slis';

/** prom-client's process and Node.js collectors: the runtime's, as Go's collectors are upstream's. */
const RUNTIME = /^(process|nodejs)_/;

/** Upstream's sync buckets: 1 ms doubling to ~16 s. */
const SYNC_BUCKETS = exponentialBuckets(0.001, 2, 15);
/** Upstream's network programming buckets: 0.25 s, 0.5 s, 1..59 s, 60..115 s by 5, 2..5 min by 30 s. */
const PROGRAMMING_BUCKETS = [
  ...linearBuckets(0.25, 0.25, 2), ...linearBuckets(1, 1, 59), ...linearBuckets(60, 5, 12), ...linearBuckets(120, 30, 7),
];

export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;

export function createProxyMetrics(opts: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  const r = [registry];
  const fam = ['ip_family'] as const;
  const m = {
    registry,
    // --- kube-proxy's metrics -------------------------------------------------------------------
    syncDuration: new Histogram({ name: 'kubeproxy_sync_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds', labelNames: fam, buckets: SYNC_BUCKETS, registers: r }),
    syncFullDuration: new Histogram({ name: 'kubeproxy_sync_full_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds for full resyncs', labelNames: fam, buckets: SYNC_BUCKETS, registers: r }),
    syncPartialDuration: new Histogram({ name: 'kubeproxy_sync_partial_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds for partial resyncs', labelNames: fam, buckets: SYNC_BUCKETS, registers: r }),
    networkProgramming: new Histogram({ name: 'kubeproxy_network_programming_duration_seconds', help: 'In Cluster Network Programming Latency in seconds', labelNames: fam, buckets: PROGRAMMING_BUCKETS, registers: r }),
    lastSync: new Gauge({ name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', help: 'The last time proxy rules were successfully synced', labelNames: fam, registers: r }),
    lastQueued: new Gauge({ name: 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', help: 'The last time a sync of proxy rules was queued', labelNames: fam, registers: r }),
    endpointChangesPending: new Gauge({ name: 'kubeproxy_sync_proxy_rules_endpoint_changes_pending', help: 'Pending proxy rules Endpoint changes', registers: r }),
    endpointChangesTotal: new Counter({ name: 'kubeproxy_sync_proxy_rules_endpoint_changes_total', help: 'Cumulative proxy rules Endpoint changes', registers: r }),
    serviceChangesPending: new Gauge({ name: 'kubeproxy_sync_proxy_rules_service_changes_pending', help: 'Pending proxy rules Service changes', registers: r }),
    serviceChangesTotal: new Counter({ name: 'kubeproxy_sync_proxy_rules_service_changes_total', help: 'Cumulative proxy rules Service changes', registers: r }),
    noLocalEndpoints: new Gauge({ name: 'kubeproxy_sync_proxy_rules_no_local_endpoints_total', help: 'Number of services with a Local traffic policy and no endpoints', labelNames: ['ip_family', 'traffic_policy'] as const, registers: r }),
    nftablesSyncFailures: new Counter({ name: 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total', help: 'Cumulative proxy nftables sync failures', labelNames: fam, registers: r }),
    // Upstream deletes stale chains in a transaction of their own, which can fail apart from the sync.
    // kpng deletes the chains no service uses any more inside the sync's own atomic batch (nft/plan.ts,
    // settleSharedChains): such a failure is the sync's, counted above. This one never moves.
    nftablesCleanupFailures: new Counter({ name: 'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total', help: 'Cumulative proxy nftables cleanup failures', labelNames: fam, registers: r }),
    healthzTotal: new Counter({ name: 'kubeproxy_proxy_healthz_total', help: 'Cumulative proxy healthz HTTP status', labelNames: ['code'] as const, registers: r }),
    livezTotal: new Counter({ name: 'kubeproxy_proxy_livez_total', help: 'Cumulative proxy livez HTTP status', labelNames: ['code'] as const, registers: r }),
    // Upstream's reconciler runs on every sync; kpng's clean-up only when a sync made entries stale.
    conntrackSyncDuration: new Histogram({ name: 'kubeproxy_conntrack_reconciler_sync_duration_seconds', help: 'ReconcileConntrackFlowsLatency latency in seconds', labelNames: fam, buckets: SYNC_BUCKETS, registers: r }),
    conntrackDeletedEntries: new Counter({ name: 'kubeproxy_conntrack_reconciler_deleted_entries_total', help: 'Cumulative conntrack flows deleted by conntrack reconciler', labelNames: fam, registers: r }),
    // --- client-go's, for the kube source's requests to the API server --------------------------
    restClient: createRestClientMetrics(registry),
    // --- component-base's: the metrics port's SLIs (/metrics/slis) ------------------------------
    slis: createSliMetrics(),
    // --- kpng's own -----------------------------------------------------------------------------
    info: new Gauge({ name: 'kpng_build_info', help: 'Always 1: the kpng version, the backend and the Node.js runtime', labelNames: ['version', 'backend', 'node'] as const, registers: r }),
    revision: new Gauge({ name: 'kpng_state_revision', help: 'Revision of this node\'s ENLS (moves only when some item\'s content changes)', registers: r }),
    items: new Gauge({ name: 'kpng_state_items', help: 'Items (services and the node) in this node\'s ENLS', registers: r }),
    events: new Gauge({ name: 'kpng_source_events', help: 'Objects received from the source (adds, updates, deletes) since start; a counter exported as a gauge because it is read from the store', registers: r }),
    revsPerEvent: new Gauge({ name: 'kpng_revisions_per_event_ratio', help: 'ENLS revisions divided by source events: the share of events that changed this node\'s state', registers: r }),
    appliedRevision: new Gauge({ name: 'kpng_sync_applied_revision', help: 'The ENLS revision the backend last applied successfully', labelNames: ['backend'] as const, registers: r }),
    syncs: new Counter({ name: 'kpng_syncs_total', help: 'Batches applied by the backend, by result (ok, failed) and kind (full, partial)', labelNames: ['backend', 'result', 'kind'] as const, registers: r }),
    stateLost: new Counter({ name: 'kpng_kernel_state_lost_total', help: 'Times the state a backend applied was found changed or removed by something else (another process editing its nftables table, severed BPF links, lost change notifications); each is repaired by a full resync', labelNames: ['backend'] as const, registers: r }),
    batchChanges: new Histogram({ name: 'kpng_sync_batch_changes', help: 'Changed items (Set or Delete) per applied batch', labelNames: ['backend'] as const, buckets: exponentialBuckets(1, 4, 10), registers: r }),
    netlinkMessages: new Counter({ name: 'kpng_netlink_messages_total', help: 'Netlink messages sent to the kernel by a kernel backend', labelNames: ['backend'] as const, registers: r }),
    netlinkBytes: new Counter({ name: 'kpng_netlink_bytes_total', help: 'Bytes of netlink messages sent to the kernel by a kernel backend', labelNames: ['backend'] as const, registers: r }),
    kernelDuration: new Histogram({ name: 'kpng_kernel_sync_duration_seconds', help: 'Time spent waiting for the kernel per sync (the sync duration minus kpng\'s own work)', labelNames: ['backend'] as const, buckets: SYNC_BUCKETS, registers: r }),
    conntrackDeleted: new Counter({ name: 'kpng_conntrack_entries_deleted_total', help: 'Stale UDP conntrack entries deleted after endpoint changes', labelNames: ['backend'] as const, registers: r }),
    watchEvents: new Counter({ name: 'kpng_kube_watch_events_total', help: 'Object events (added, modified, deleted) the API server sent the watches, by resource; the initial events of a watch-list included', labelNames: ['resource'] as const, registers: r }),
    watchBytes: new Counter({ name: 'kpng_kube_watch_bytes_total', help: 'Bytes of the watch streams the API server sent, by resource (lists: rest_client_response_size_bytes)', labelNames: ['resource'] as const, registers: r }),
    lastHeard: new Gauge({ name: 'kpng_kube_last_heard_timestamp_seconds', help: 'When the API server last sent this resource\'s list or watch anything (an event, a bookmark: about once a minute on a quiet watch); time() minus it is how stale this node\'s view may be', labelNames: ['resource'] as const, registers: r }),
    healthCheckPorts: new Gauge({ name: 'kpng_health_check_node_ports', help: 'Health-check node ports open (services with externalTrafficPolicy Local and a healthCheckNodePort)', registers: r }),
  };
  // --- component-base's: feature gates and the metrics about metrics -------------------------------
  registerFeatureGates(registry);
  registerLinkedApiserverMetrics(registry);
  registerMetaMetrics(registry, () => [
    ...registry.getMetricsAsArray().map((f) => f.name).filter((n) => !RUNTIME.test(n)),
    ...m.slis.registry.getMetricsAsArray().map((f) => f.name),
  ]);
  let processMetrics = opts.processMetrics !== false;
  /** The kube source's watches, into the kpng_kube_* families above. */
  const kubeWatch: WatchObserver = {
    events: (resource, n) => m.watchEvents.labels(resource).inc(n),
    bytes: (resource, n) => m.watchBytes.labels(resource).inc(n),
    heard: (resource) => m.lastHeard.labels(resource).set(Date.now() / 1000),
  };
  return {
    ...m,
    kubeWatch,
    /**
     * Registers the process and Node.js metrics (process_cpu_seconds_total, nodejs_heap_*...) once.
     * Called after the first sync or at the first scrape, whichever comes first: their modules are
     * then not on the way to the first sync.
     */
    registerProcessMetrics(): void {
      if (!processMetrics) return;
      processMetrics = false;
      collectDefaultMetrics({ register: registry });
    },
  };
}

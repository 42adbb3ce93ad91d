// The kube source: three reflectors (Services, EndpointSlices discovery.k8s.io/v1, and this
// node's Node) feeding the ClusterStore from an API server. The store is marked synced only once
// every initial list has been applied: a sink never sees a partial first state (an empty first
// sync would wipe every rule). Until then, and whenever the API server is away, the reflectors
// retry on their own; the last good state stays in force.
import type { ClusterStore } from '../../store/cluster';
import type { Logger } from '../../util/log';
import { DEFAULT_BURST, DEFAULT_QPS, rateLimited, TokenBucket } from './rate-limit';
import { loadKubeTarget, type KubeTarget } from './config';
import { hostLabel, type RequestObserver, type Transport } from './http';
import { limitYoungGeneration, reduceMemoryWhenIdle } from '../../util/memory';
import { Reflector, WatchListSupport, type ReflectorOptions, type WatchObserver } from './reflector';
import { nodeFieldSelector, selectorsFor } from './selectors';
import type { ContentType } from './protobuf';

export { Reflector, WatchListSupport, type WatchObserver } from './reflector';
export { loadKubeTarget, type KubeTarget } from './config';
export type { RequestObserver } from './http';

/** Reflector settings a caller may tune; `watchList` false forces paginated initial lists. */
export type KubeTuning = Partial<Pick<ReflectorOptions, 'pageSize' | 'minWatchTimeoutSeconds' | 'idleTimeoutMs' | 'requestTimeoutMs'>> & { watchList?: boolean };

export interface KubeSourceOptions {
  store: ClusterStore;
  log: Logger;
  kubeconfig?: string;
  node: string;
  serviceProxyName: string;
  signal: AbortSignal;
  /**
   * One memory-reducing GC once the process is idle after the first lists (default true). A caller
   * that programs the kernel passes false and does it after its first sync: started at "synced", the
   * GC could land in the middle of that sync and stretch it by seconds on a large cluster.
   */
  reduceMemoryWhenSynced?: boolean;
  /** The encoding asked of the API server (default 'protobuf', as kube-proxy; JSON when it cannot). */
  contentType?: ContentType;
  /** --master: the API server's URL, instead of the kubeconfig's. */
  master?: string;
  /** --kube-api-qps / --kube-api-burst (client-go's meaning: qps 0 is 5, negative is no limit). */
  qps?: number;
  burst?: number;
  /** Sees every HTTP request made to the API server (kube-proxy's rest_client_* metrics). */
  observeRequests?: RequestObserver;
  /** Sees what the watches receive (kpng's kpng_kube_watch_* metrics). */
  observeWatches?: WatchObserver;
  /** Where the API server is, already read (loadKubeTarget); else read here from kubeconfig/master/observeRequests. */
  target?: KubeTarget;
}

/** The reflectors for one node, over any transport (tests use a plain HTTP server). */
export function createReflectors(
  opts: Omit<KubeSourceOptions, 'kubeconfig' | 'signal'> & { transport: Transport },
  tuning: KubeTuning = {},
): Reflector[] {
  const sel = selectorsFor(opts.serviceProxyName);
  const { watchList = true, ...rest } = tuning;
  // One verdict on watch-list support for the three resources (one server).
  const common = { transport: opts.transport, store: opts.store, log: opts.log, contentType: opts.contentType, observer: opts.observeWatches, ...rest, watchList: new WatchListSupport(watchList) };
  return [
    new Reflector({ ...common, kind: 'Service', what: 'Services', path: '/api/v1/services', labelSelector: sel.services }),
    new Reflector({ ...common, kind: 'EndpointSlice', what: 'EndpointSlices', path: '/apis/discovery.k8s.io/v1/endpointslices', labelSelector: sel.endpointSlices }),
    new Reflector({ ...common, kind: 'Node', what: `Node ${opts.node}`, path: '/api/v1/nodes', fieldSelector: nodeFieldSelector(opts.node) }),
  ];
}

/** Runs the reflectors; marks the store synced after every first list. */
export function runReflectors(reflectors: Reflector[], store: Pick<ClusterStore, 'markSynced' | 'getNode'>, log: Logger, node: string, signal: AbortSignal, reduceMemory = true): { stop(): Promise<void> } {
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) ac.abort();
  const runs = reflectors.map((r) => r.run(ac.signal));
  void Promise.all(reflectors.map((r) => r.whenListed())).then(() => {
    if (ac.signal.aborted) return;
    if (!store.getNode(node)) log.warn(`kube: Node ${node} not found (or not usable): no zone for topology hints until it appears`);
    log.info('kube: every initial list applied; the state is synced');
    store.markSynced();
    if (reduceMemory) reduceMemoryWhenIdle(log, ac.signal);
  });
  return {
    async stop() {
      ac.abort();
      signal.removeEventListener('abort', onAbort);
      await Promise.allSettled(runs);
    },
  };
}

/** Lists (watch-list or paginated) then watches; calls store.markSynced() once every initial list has been applied. */
export type StartKubeSource = (opts: KubeSourceOptions) => Promise<{ stop(): Promise<void> }>;

export const startKubeSource: StartKubeSource = async (opts) => {
  // Before the first lists: they are what would grow V8's young generation (memory.ts).
  if (limitYoungGeneration()) opts.log.debug('memory: V8 young generation kept at its initial size (--semi-space-growth-factor=1)');
  const target = opts.target ?? loadKubeTarget(opts.kubeconfig, 'kpng', { master: opts.master, observer: opts.observeRequests });
  const bucket = new TokenBucket(opts.qps ?? DEFAULT_QPS, opts.burst ?? DEFAULT_BURST);
  const limit = bucket.unlimited ? 'no rate limit' : `${opts.qps || DEFAULT_QPS} requests/s, bursts of ${opts.burst || DEFAULT_BURST}`;
  opts.log.info(`kube: API server ${target.transport.server} (${target.describe}, ${opts.contentType ?? 'protobuf'}, ${limit}), node ${opts.node}${opts.serviceProxyName ? `, service-proxy-name ${opts.serviceProxyName}` : ''}`);
  const host = hostLabel(target.transport.server);
  const waited = opts.observeRequests?.rateLimited ? (s: number) => opts.observeRequests!.rateLimited!('GET', host, s) : undefined;
  const reflectors = createReflectors({ ...opts, transport: rateLimited(target.transport, bucket, waited) }, tuningFromEnv());
  return runReflectors(reflectors, opts.store, opts.log, opts.node, opts.signal, opts.reduceMemoryWhenSynced ?? true);
};

/** Test and bench knobs (not part of the CLI): KPNG_KUBE_WATCH_TIMEOUT_S, KPNG_KUBE_IDLE_TIMEOUT_MS,
 *  KPNG_KUBE_REQUEST_TIMEOUT_MS, KPNG_KUBE_PAGE_SIZE, KPNG_KUBE_WATCH_LIST=0 (paginated lists); the
 *  transport reads KPNG_KUBE_CONNECT_TIMEOUT_MS (http.ts). */
export function tuningFromEnv(): KubeTuning {
  const num = (name: string) => {
    const v = process.env[name];
    const n = v === undefined || v === '' ? NaN : Number(v);
    return Number.isFinite(n) && n >= 0 ? n : undefined;
  };
  const t: KubeTuning = {};
  if (process.env.KPNG_KUBE_WATCH_LIST === '0') t.watchList = false;
  const w = num('KPNG_KUBE_WATCH_TIMEOUT_S');
  if (w !== undefined && w > 0) t.minWatchTimeoutSeconds = w;
  const i = num('KPNG_KUBE_IDLE_TIMEOUT_MS');
  if (i !== undefined && i > 0) t.idleTimeoutMs = i;
  const r = num('KPNG_KUBE_REQUEST_TIMEOUT_MS');
  if (r !== undefined && r > 0) t.requestTimeoutMs = r;
  const p = num('KPNG_KUBE_PAGE_SIZE');
  if (p !== undefined) t.pageSize = p;
  return t;
}

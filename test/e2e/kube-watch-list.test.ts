// The kube source's initial sync against a real kube-apiserver (v1.37: WatchList on by default):
// by watch-list (one watch per resource with sendInitialEvents; no list request at all), and,
// with the server's WatchList gate off, the fallback to paginated lists (the 422 logged once).
// Both give the same complete first sync, and later changes arrive on the watch.
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { KpngTrace } from '../shared/kpng-trace';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';

const NS = 'default';

async function ok(p: Promise<{ status: number; text: string }>, what: string): Promise<void> {
  const r = await p;
  if (r.status < 200 || r.status >= 300) throw new Error(`${what}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
}

/** What the API server counted for EndpointSlices (nothing but kpng reads them here: no controller
 *  manager runs): watch-lists served and LIST requests. */
async function sliceReads(cp: ControlPlane): Promise<{ watchLists: number; lists: number }> {
  const text = (await cp.request('GET', '/metrics')).text;
  let watchLists = 0;
  let lists = 0;
  for (const l of text.split('\n')) {
    if (!/resource="endpointslices"/.test(l)) continue;
    const v = Number(l.slice(l.lastIndexOf(' ') + 1));
    if (l.startsWith('apiserver_watch_list_duration_seconds_count{')) watchLists += v;
    if (l.startsWith('apiserver_request_total{') && /verb="LIST"/.test(l)) lists += v;
  }
  return { watchLists, lists };
}

/** A control plane with a node and 5 services with one endpoint each, and kpng started on it;
 *  `reads` = the API server's EndpointSlice reads during kpng's start. */
async function scenario(apiServerArgs: string[], kpngArgs: string[] = []): Promise<{ cp: ControlPlane; kpng: KpngTrace; reads: { watchLists: number; lists: number } }> {
  const cp = await startControlPlane({ log: () => {}, apiServerArgs });
  try {
    await ok(cp.request('POST', NODES, newNode('n1', 'zone-a')), 'create node');
    await ok(cp.request('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date())), 'node status');
    for (let i = 0; i < 5; i++) {
      await ok(cp.request('POST', SERVICES(NS), newService(`pre-${i}`)), 'create service');
      await ok(cp.request('POST', SLICES(NS), newEndpointSlice(`pre-${i}-abc`, `pre-${i}`, [{ ip: `10.244.1.${i + 1}` }])), 'create slice');
    }
    const before = await sliceReads(cp);
    const kpng = new KpngTrace({ kubeconfig: cp.kubeconfigPath, node: 'n1', args: ['--min-sync-period', '0', '--log-level', 'debug', ...kpngArgs], env: {} });
    await kpng.waitFor('first sync', () => kpng.syncs.length > 0, 30_000);
    const after = await sliceReads(cp);
    return { cp, kpng, reads: { watchLists: after.watchLists - before.watchLists, lists: after.lists - before.lists } };
  } catch (e) {
    await cp.stop();
    throw e;
  }
}

/** The first sync holds every object; a change made afterwards reaches the sink through the watch. */
async function expectCompleteAndLive(cp: ControlPlane, kpng: KpngTrace): Promise<void> {
  expect(kpng.lines[0]).toBe('reset');
  expect(kpng.syncs[0].changes).toBe(7); // node + kubernetes + 5 services
  for (let i = 0; i < 5; i++) expect(kpng.state.get(`svc/default/pre-${i}`)).toBe(`ClusterIP 80/TCP cluster-ip=cluster[10.244.1.${i + 1}:8080]`);
  expect(kpng.state.get('node')).toBe('node n1 zone=zone-a addresses=192.168.1.1');
  await ok(cp.request('POST', SERVICES(NS), newService('later')), 'create service');
  await ok(cp.request('POST', SLICES(NS), newEndpointSlice('later-abc', 'later', [{ ip: '10.244.2.1' }])), 'create slice');
  await kpng.waitForItem('svc/default/later', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.2.1:8080]', 30_000);
}

describe('kube source initial sync: watch-list, and the fallback to lists (real API server)', () => {
  let cp: ControlPlane | undefined;
  let kpng: KpngTrace | undefined;
  afterEach(async () => {
    await kpng?.stop();
    await cp?.stop();
    kpng = cp = undefined;
  }, 60_000);

  test('a v1.37 server: every resource synced by watch-list, no list request', async () => {
    let reads;
    ({ cp, kpng, reads } = await scenario([]));
    const k = kpng;
    // The server's own count: one watch-list served for EndpointSlices, no LIST.
    expect(reads).toEqual({ watchLists: 1, lists: 0 });
    // In protobuf, as kube-proxy asks for by default.
    expect(k.stderr.some((l) => /kube: listed 6 Services \(resourceVersion \d+, watch-list, protobuf, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /kube: listed 5 EndpointSlices \(resourceVersion \d+, watch-list, protobuf, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /kube: listed 1 Node n1 \(resourceVersion \d+, watch-list, protobuf, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /page|does not serve watch-list/.test(l))).toBe(false);
    await expectCompleteAndLive(cp, k);
  }, 180_000);

  test('--kube-api-content-type application/json: the same watch-list sync in JSON', async () => {
    ({ cp, kpng } = await scenario([], ['--kube-api-content-type', 'application/json']));
    const k = kpng;
    expect(k.stderr.some((l) => /kube: listed 6 Services \(resourceVersion \d+, watch-list, JSON, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /kube: listed 5 EndpointSlices \(resourceVersion \d+, watch-list, JSON, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /protobuf/.test(l))).toBe(false);
    await expectCompleteAndLive(cp, k);
  }, 180_000);

  test('WatchList gate off: the 422 is logged once, paginated lists sync every resource', async () => {
    let reads;
    ({ cp, kpng, reads } = await scenario(['--feature-gates=WatchList=false']));
    const k = kpng;
    expect(reads).toEqual({ watchLists: 0, lists: 1 });
    const refused = k.stderr.filter((l) => /does not serve watch-list/.test(l));
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(/HTTP 422 Invalid: .*sendInitialEvents is forbidden/);
    expect(k.stderr.some((l) => /kube: listed 6 Services \(resourceVersion \d+, 1 page, protobuf, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /kube: listed 5 EndpointSlices \(resourceVersion \d+, 1 page, protobuf, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /kube: listed 1 Node n1 \(resourceVersion \d+, 1 page, protobuf, /.test(l))).toBe(true);
    expect(k.stderr.some((l) => /watch-list,/.test(l))).toBe(false);
    await expectCompleteAndLive(cp, k);
  }, 180_000);
});

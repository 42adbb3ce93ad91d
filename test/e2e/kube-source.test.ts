// The kube source against a real kube-apiserver: `kpng kube --to trace` runs as a child process
// (built CLI, dist/) and its trace shows every revision the sink receives. Creates, updates and
// deletes reach the sink; updates that change nothing a proxy uses produce no revision; the
// server-side label selectors are kube-proxy's; the first sync already holds every object.
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { KpngTrace, kpngOnce, traceState } from '../shared/kpng-trace';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';

const NS = 'default';

async function ok(p: Promise<{ status: number; text: string }>, what: string): Promise<any> {
  const r = await p;
  if (r.status < 200 || r.status >= 300) throw new Error(`${what}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  return (r as any).body;
}

describe('kube source (kpng kube) against a real API server', () => {
  let cp: ControlPlane;
  let kpng: KpngTrace;
  const ips: Record<string, string> = {};

  const create = async (kind: 'svc' | 'slice', obj: any) => {
    const body = await ok(cp.request('POST', kind === 'svc' ? SERVICES(NS) : SLICES(NS), obj), `create ${kind} ${obj.metadata.name}`);
    if (kind === 'svc') ips[obj.metadata.name] = body.spec.clusterIP;
    return body;
  };
  const patch = (path: string, body: unknown, what: string) => ok(cp.request('PATCH', path, body), what);
  const del = (path: string, what: string) => ok(cp.request('DELETE', path), what);

  beforeAll(async () => {
    cp = await startControlPlane({ log: () => {} });
    await ok(cp.request('POST', NODES, newNode('n1', 'zone-a')), 'create node');
    await patch(`${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date()), 'node status');
    // Objects that exist before kpng starts: they must all be in the first sync.
    for (let i = 0; i < 5; i++) {
      await create('svc', newService(`pre-${i}`));
      await create('slice', newEndpointSlice(`pre-${i}-abc`, `pre-${i}`, [{ ip: `10.244.1.${i + 1}` }]));
    }
    // Paginated lists (not the watch-list, test/e2e/kube-watch-list.test.ts) with page size 2: the
    // initial lists take several pages (limit/continue).
    kpng = new KpngTrace({ kubeconfig: cp.kubeconfigPath, node: 'n1', args: ['--min-sync-period', '0', '--stats', '--log-level', 'debug'], env: { KPNG_KUBE_PAGE_SIZE: '2', KPNG_KUBE_WATCH_LIST: '0' } });
    await kpng.waitFor('first sync', () => kpng.syncs.length > 0, 30_000);
  }, 180_000);

  afterAll(async () => {
    await kpng?.stop();
    await cp?.stop();
  }, 60_000);

  test('the first sync is complete: every object listed before it (paginated lists), no empty sync', () => {
    expect(kpng.lines[0]).toBe('reset');
    const first = kpng.syncs[0];
    // node + kubernetes + 5 services, all in the first batch
    expect(first.changes).toBe(7);
    for (let i = 0; i < 5; i++) expect(kpng.state.get(`svc/default/pre-${i}`)).toBe(`ClusterIP 80/TCP cluster-ip=cluster[10.244.1.${i + 1}:8080]`);
    expect(kpng.state.get('node')).toBe('node n1 zone=zone-a addresses=192.168.1.1');
    expect(kpng.stderr.some((l) => /kube: listed 6 Services \(resourceVersion \d+, 3 pages/.test(l))).toBe(true);
    expect(kpng.stderr.some((l) => /kube: listed 5 EndpointSlices \(resourceVersion \d+, 3 pages/.test(l))).toBe(true);
    expect(kpng.stderr.some((l) => /kube: listed 1 Node n1/.test(l))).toBe(true);
  });

  test('rest_client_* count every request to the API server, as client-go labels them; watches are counted, not timed', async () => {
    // 7 list pages (Services 3, EndpointSlices 3, Node 1), then one watch per reflector.
    for (const w of ['Services', 'EndpointSlices', 'Node n1']) {
      await kpng.waitFor(`the ${w} watch`, () => kpng.stderr.some((l) => l.includes(`kube: ${w}: watching from resourceVersion`)), 10_000);
    }
    const served = kpng.stderr.map((l) => /metrics: serving on http:\/\/127\.0\.0\.1:(\d+)/.exec(l)).find(Boolean);
    expect(served).toBeTruthy();
    const text = await (await fetch(`http://127.0.0.1:${served![1]}/metrics`)).text();
    const host = new URL(cp.server).host;
    const sample = (name: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    expect(sample(`rest_client_requests_total{code="200",method="GET",host="${host}"}`)).toBe(10);
    expect(sample(`rest_client_request_duration_seconds_count{verb="GET",host="${host}"}`)).toBe(7);
    expect(sample(`rest_client_request_duration_seconds_bucket{le="60",verb="GET",host="${host}"}`)).toBe(7);
  });

  test('creates, updates and deletes of Services and EndpointSlices reach the sink', async () => {
    await create('svc', newService('web', { ports: [{ name: 'http', port: 80, targetPort: 8080 }, { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' }] }));
    await kpng.waitForItem('svc/default/web', 'ClusterIP 80/TCP cluster-ip=reject 53/UDP cluster-ip=reject');

    await create('slice', newEndpointSlice('web-1', 'web', [{ ip: '10.244.0.5' }, { ip: '10.244.0.6', ready: false, serving: false }], {
      ports: [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }],
    }));
    await kpng.waitForItem('svc/default/web', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.0.5:8080] 53/UDP cluster-ip=cluster[10.244.0.5:5353]');

    // Readiness flips: .6 becomes ready, .5 terminates (not ready, still serving, terminating).
    await patch(`${SLICES(NS)}/web-1`, newEndpointSlice('web-1', 'web', [{ ip: '10.244.0.5', ready: false, serving: true, terminating: true }, { ip: '10.244.0.6' }], {
      ports: [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }],
    }), 'flip readiness');
    await kpng.waitForItem('svc/default/web', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.0.6:8080] 53/UDP cluster-ip=cluster[10.244.0.6:5353]');

    // A second slice for the same service (pod replacement: a new IP elsewhere).
    await create('slice', newEndpointSlice('web-2', 'web', [{ ip: '10.244.2.7' }], { ports: [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }] }));
    await kpng.waitForItem('svc/default/web', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.0.6:8080,10.244.2.7:8080] 53/UDP cluster-ip=cluster[10.244.0.6:5353,10.244.2.7:5353]');

    // Service port change.
    await patch(`${SERVICES(NS)}/web`, { spec: { ports: [{ name: 'http', port: 8000, targetPort: 8080, protocol: 'TCP' }] } }, 'service port');
    await kpng.waitForItem('svc/default/web', 'ClusterIP 8000/TCP cluster-ip=cluster[10.244.0.6:8080,10.244.2.7:8080]');

    await del(`${SLICES(NS)}/web-1`, 'delete slice');
    await kpng.waitForItem('svc/default/web', 'ClusterIP 8000/TCP cluster-ip=cluster[10.244.2.7:8080]');
    await del(`${SLICES(NS)}/web-2`, 'delete slice');
    await kpng.waitForItem('svc/default/web', 'ClusterIP 8000/TCP cluster-ip=reject');
    await del(`${SERVICES(NS)}/web`, 'delete service');
    await kpng.waitForGone('svc/default/web');
    expect(kpng.lines).toContain('delete svc/default/web');
  }, 60_000);

  test('kpng_kube_watch_* count what the watches received, by resource, and when the server was last heard from', async () => {
    const served = kpng.stderr.map((l) => /metrics: serving on http:\/\/127\.0\.0\.1:(\d+)/.exec(l)).find(Boolean);
    const text = await (await fetch(`http://127.0.0.1:${served![1]}/metrics`)).text();
    const sample = (name: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    // The test before created, updated and deleted Services and EndpointSlices: the watches saw them.
    for (const resource of ['services', 'endpointslices']) {
      const events = sample(`kpng_kube_watch_events_total{resource="${resource}"}`)!;
      expect(events).toBeGreaterThanOrEqual(2);
      expect(sample(`kpng_kube_watch_bytes_total{resource="${resource}"}`)).toBeGreaterThan(100 * events);
    }
    // Every reflector listed (and the Node's watch may have had nothing yet): each was heard from.
    for (const resource of ['services', 'endpointslices', 'nodes']) {
      const heard = sample(`kpng_kube_last_heard_timestamp_seconds{resource="${resource}"}`)!;
      expect(Date.now() / 1000 - heard).toBeLessThan(300);
      expect(heard).toBeGreaterThan(0);
    }
  });

  test('updates that change nothing a proxy uses (labels, annotations, heartbeats) produce no revision', async () => {
    await create('svc', newService('quiet'));
    await create('slice', newEndpointSlice('quiet-1', 'quiet', [{ ip: '10.244.3.1' }]));
    await kpng.waitForItem('svc/default/quiet', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.3.1:8080]');
    // The item's Set and the `sync rev=` line that closes its revision can arrive in two reads:
    // count from that revision, not the one before it.
    await kpng.waitFor('the revision to close', () => kpng.lines.at(-1)?.startsWith('sync ') ?? false, 5000);
    const rev0 = kpng.rev;
    const lines0 = kpng.lines.length;
    const events0 = await eventsNow();

    // Services: labels, annotations (the last-applied kind), a no-op apply.
    for (let i = 0; i < 3; i++) {
      await patch(`${SERVICES(NS)}/quiet`, { metadata: { labels: { tier: `t${i}` }, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': `{"n":${i}}` } } }, 'svc noise');
    }
    // EndpointSlices: labels, annotations, a targetRef-free rewrite with the same endpoints.
    for (let i = 0; i < 3; i++) {
      await patch(`${SLICES(NS)}/quiet-1`, { metadata: { labels: { noise: `n${i}` }, annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date(Date.now() + i * 1000).toISOString() } } }, 'slice noise');
    }
    // Node: kubelet heartbeats (status conditions), an unrelated label.
    for (let i = 0; i < 3; i++) {
      await patch(`${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date(Date.now() + (i + 1) * 10_000)), 'heartbeat');
    }
    await patch(`${NODES}/n1`, { metadata: { labels: { 'node.kubernetes.io/noise': 'x' } } }, 'node label');

    // Sentinels, one per watch (each watch delivers in order): a real change of each kind.
    await create('svc', newService('sentinel'));
    await patch(`${SLICES(NS)}/quiet-1`, { endpoints: [{ addresses: ['10.244.3.2'], conditions: { ready: true } }] }, 'slice sentinel');
    await patch(`${NODES}/n1`, { metadata: { labels: { 'topology.kubernetes.io/zone': 'zone-b' } } }, 'node sentinel');
    await kpng.waitForItem('svc/default/sentinel', 'ClusterIP 80/TCP cluster-ip=reject');
    await kpng.waitForItem('svc/default/quiet', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.3.2:8080]');
    await kpng.waitForItem('node', 'node n1 zone=zone-b addresses=192.168.1.1');

    // Only the sentinels changed the state: at most 3 revisions (fewer if coalesced), and the
    // trace holds nothing but their Sets.
    const sets = kpng.lines.slice(lines0).filter((l) => l.startsWith('set ') || l.startsWith('delete '));
    expect(new Set(sets.map((l) => l.split(' ')[1]))).toEqual(new Set(['svc/default/sentinel', 'svc/default/quiet', 'node']));
    expect(sets.filter((l) => l.startsWith('set svc/default/quiet'))).toHaveLength(1);
    expect(kpng.rev - rev0).toBeLessThanOrEqual(3);
    // The noise did arrive (10 events + 3 sentinels), it just changed nothing.
    await kpng.waitFor('stats to count the events', () => (kpng.stats.at(-1)?.events ?? 0) - events0 >= 13, 5000);
  }, 60_000);

  test('a Node change that matters (zone label, addresses) reaches the sink', async () => {
    await patch(`${NODES}/n1/status`, nodeStatus(['192.168.1.1', '203.0.113.9'], new Date()), 'addresses');
    await kpng.waitForItem('node', 'node n1 zone=zone-b addresses=192.168.1.1,203.0.113.9');
    await patch(`${NODES}/n1`, { metadata: { labels: { 'topology.kubernetes.io/zone': null } } }, 'remove zone');
    await kpng.waitForItem('node', 'node n1 zone=- addresses=192.168.1.1,203.0.113.9');
  }, 30_000);

  test("kube-proxy's label selectors: service-proxy-name and headless objects are not watched", async () => {
    await create('svc', newService('other-proxy', { labels: { 'service.kubernetes.io/service-proxy-name': 'someone-else' } }));
    await create('svc', newService('mine'));
    // A slice marked headless (as the EndpointSlice controller marks those of headless services).
    await create('slice', newEndpointSlice('mine-headless', 'mine', [{ ip: '10.244.4.9' }], { labels: { 'service.kubernetes.io/headless': '' } }));
    await create('slice', newEndpointSlice('mine-1', 'mine', [{ ip: '10.244.4.1' }]));
    await kpng.waitForItem('svc/default/mine', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.4.1:8080]');
    expect(kpng.state.has('svc/default/other-proxy')).toBe(false);

    // Labelling a watched service for another proxy: the server sends DELETED (it left the selector).
    await patch(`${SERVICES(NS)}/mine`, { metadata: { labels: { 'service.kubernetes.io/service-proxy-name': 'someone-else' } } }, 'label away');
    await kpng.waitForGone('svc/default/mine');
    // And back.
    await patch(`${SERVICES(NS)}/mine`, { metadata: { labels: { 'service.kubernetes.io/service-proxy-name': null } } }, 'label back');
    await kpng.waitForItem('svc/default/mine', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.4.1:8080]');
  }, 30_000);

  test('--service-proxy-name NAME also proxies services labelled NAME, not those of others', async () => {
    await create('svc', newService('named', { labels: { 'service.kubernetes.io/service-proxy-name': 'kpng-x' } }));
    const r = await kpngOnce(cp.kubeconfigPath, 'n1', ['--to', 'trace', '--service-proxy-name', 'kpng-x']);
    expect(r.code).toBe(0);
    const st = traceState(r.stdout);
    expect(st.has('svc/default/named')).toBe(true);
    expect(st.has('svc/default/quiet')).toBe(true);
    expect(st.has('svc/default/other-proxy')).toBe(false);
  }, 60_000);

  test('the long-running state equals a fresh list (nothing stale, nothing missing)', async () => {
    await settle();
    const fresh = await kpngOnce(cp.kubeconfigPath, 'n1', ['--to', 'trace']);
    expect(fresh.code).toBe(0);
    expect(new Map([...kpng.state].sort())).toEqual(new Map([...traceState(fresh.stdout)].sort()));
  }, 60_000);

  async function eventsNow(): Promise<number> {
    const n = kpng.stats.length;
    await kpng.waitFor('a stats line', () => kpng.stats.length > n, 5000);
    return kpng.stats.at(-1)!.events;
  }

  /** Waits until no new trace line came for a while. */
  async function settle(quietMs = 1500): Promise<void> {
    let last = -1;
    while (last !== kpng.lines.length) {
      last = kpng.lines.length;
      await new Promise((r) => setTimeout(r, quietMs));
    }
  }
});

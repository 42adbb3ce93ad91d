// bench:vs-upstream's --fill etcd: objects written straight into etcd must read, through the real API
// server, as the ones created through the API do (both proxies list them), and be writable through it
// (the churn PUTs them). Also the table's lower bounds (a proxy that did not finish its start) and its
// figures over several runs (median, with the range beside it).
import { createSynthetic } from '../../bench/vs-upstream/cluster';
import { ipv4Allocator } from '../../bench/vs-upstream/etcd-fill';
import { ratio, spread, spreadFigure, table, type Figure } from '../../bench/vs-upstream/report';
import { startControlPlane, type ControlPlane } from './support/controlplane';

test('cluster IPs come from the CIDR, past the range the API server allocates from first', () => {
  const next = ipv4Allocator('10.96.0.0/12');
  expect([next(), next()]).toEqual(['10.96.4.0', '10.96.4.1']);
  const small = ipv4Allocator('10.0.0.0/30', 1);
  expect(small()).toBe('10.0.0.1');
  expect(small()).toBe('10.0.0.2');
  expect(() => small()).toThrow(/is full/);
  expect(() => ipv4Allocator('fd00::/108')).toThrow(/not an IPv4 CIDR/);
});

test('a lower bound reads ">" and so does its ratio', () => {
  const f: Figure = { label: 'start', unit: 's', digits: 2, values: [1200, 30, 40], lowerBound: [true, false, false] };
  expect(ratio(f, 1)).toBe('>40.00x');
  const t = table(['upstream', 'kpng nft', 'kpng ebpf'], [f]);
  expect(t).toContain('>1,200.00');
  expect(t).toContain('>30.00x');
  expect(ratio({ ...f, lowerBound: [false, true, false] }, 1)).toBe('<40.00x');
  expect(ratio({ ...f, values: [NaN, 1, 2] }, 1)).toBeUndefined();
});

test('several runs: the median with its range, the ratio of the medians', () => {
  expect(spread([3, 1, 2])).toEqual({ min: 1, median: 2, max: 3, n: 3 });
  expect(spread([4, 1, NaN, 2, 3])).toEqual({ min: 1, median: 2.5, max: 4, n: 4 });
  expect(spread([]).n).toBe(0);
  const f = spreadFigure({ label: 'start', unit: 's', digits: 2 }, [spread([3, 1, 2]), spread([0.5, 1, 4])]);
  expect(f.values).toEqual([2, 1]);
  expect(ratio(f, 1)).toBe('2.00x');
  const t = table(['upstream', 'kpng nft'], [f]);
  expect(t).toContain('2.00 (1.00..3.00)');
  expect(t).toContain('1.00 (0.50..4.00)');
  // A column never measured reads n/a, without a range.
  expect(table(['upstream', 'kpng nft'], [spreadFigure({ label: 'x', unit: 's', digits: 1 }, [spread([1]), spread([])])])).toMatch(/n\/a +n\/a/);
});

describe('--fill etcd against the real API server', () => {
  let cp: ControlPlane;
  beforeAll(async () => { cp = await startControlPlane({ serviceClusterIPRange: '10.96.0.0/12', keepAlive: true }); }, 120_000);
  afterAll(async () => { await cp?.stop(); }, 60_000);

  test('services and slices written into etcd are listed, defaulted, and writable through the API', async () => {
    const cluster = await createSynthetic(cp, 300, 3, 8, 'etcd', '10.96.0.0/12');
    expect(cluster.clusterIps).toHaveLength(300);
    const svcs = (await cp.request('GET', '/api/v1/namespaces/default/services')).body.items as any[];
    const mine = svcs.filter((s) => s.metadata.name.startsWith('svc-'));
    expect(mine).toHaveLength(300);
    expect(new Set(mine.map((s) => s.spec.clusterIP))).toEqual(new Set(cluster.clusterIps));
    expect(mine[0].spec).toMatchObject({ type: 'ClusterIP', ipFamilies: ['IPv4'], ports: [{ port: 80, protocol: 'TCP' }] });
    expect(mine[0].metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    const slices = (await cp.request('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices')).body.items as any[];
    expect(slices).toHaveLength(300);
    expect(slices[0].endpoints).toHaveLength(3);
    // The churn writes the slice back through the API (an unconditional PUT of the body it keeps).
    const s = cluster.slices[7];
    s.body.endpoints[0].addresses = ['10.250.0.9'];
    const put = await cp.request('PUT', `/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/${s.name}`, s.body);
    expect(put.status).toBe(200);
    expect(put.body.endpoints[0].addresses).toEqual(['10.250.0.9']);
    // The API server's own allocation goes on beside them (a new Service gets an IP of its own).
    const created = await cp.request('POST', '/api/v1/namespaces/default/services', { apiVersion: 'v1', kind: 'Service', metadata: { name: 'by-api' }, spec: { ports: [{ port: 80 }] } });
    expect(created.status).toBe(201);
    expect(cluster.clusterIps).not.toContain(created.body.spec.clusterIP);
  }, 120_000);
});

// What parsing shares between objects (src/util/intern.ts): port lists, node names and empty lists are
// kept once for the whole cluster, frozen so that no reader can change them for everyone.
import { computeServiceItem, nodeClass, nodeDependence, sortedHas } from '../src/model/compute';
import { parseEndpointSlice, parseService } from '../src/model/parse';
import { Interner, orEmpty } from '../src/util/intern';
import { EndpointList } from '../src/model/endpoint-list';

const svc = (name: string, ports: object[], extra: object = {}) =>
  ({ metadata: { namespace: 'd', name }, spec: { clusterIP: `10.96.0.${name.length}`, ports, ...extra } });
const parsed = <T>(r: { ok: true; value: T } | { ok: false; reason: string }): T => { if (!r.ok) throw new Error(r.reason); return r.value; };

describe('sharing parsed values', () => {
  test('services with the same ports share one frozen list; other ports get their own', () => {
    const a = parsed(parseService(svc('a', [{ name: 'http', port: 80 }])));
    const b = parsed(parseService(svc('bb', [{ name: 'http', port: 80 }])));
    const c = parsed(parseService(svc('ccc', [{ name: 'http', port: 81 }])));
    const d = parsed(parseService(svc('dddd', [{ name: 'http', port: 80, nodePort: 30080 }], { type: 'NodePort' })));
    expect(a.ports).toBe(b.ports);
    expect(c.ports).not.toBe(a.ports);
    expect(d.ports).not.toBe(a.ports);
    expect(d.ports[0]).toMatchObject({ name: 'http', port: 80, nodePort: 30080 });
    expect(Object.isFrozen(a.ports) && Object.isFrozen(a.ports[0])).toBe(true);
  });

  test('slices with the same ports share one list', () => {
    const slice = (name: string, ip: string) => parsed(parseEndpointSlice({
      metadata: { namespace: 'd', name, labels: { 'kubernetes.io/service-name': 'a' } }, addressType: 'IPv4',
      ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
      endpoints: [{ addresses: [ip], nodeName: JSON.parse('"node-1"') }],
    })).slice;
    const x = slice('a-1', '10.0.0.1'), y = slice('a-2', '10.0.0.2');
    expect(x.ports).toBe(y.ports);
    expect(x.endpoints.nodeName(0)).toBe('node-1');
  });

  test('empty lists are one frozen array: writing to it throws instead of changing every service', () => {
    const a = parsed(parseService(svc('a', [{ name: 'http', port: 80 }])));
    const b = parsed(parseService(svc('bb', [{ name: 'http', port: 80 }])));
    expect(a.externalIPs).toBe(b.loadBalancerSourceRanges);
    expect(() => a.externalIPs.push('1.2.3.4')).toThrow(TypeError);
    const item = computeServiceItem(a, [], { name: 'n1', zone: '', primary: [] });
    const port = item.service!.ports[0]!;
    expect(port.port).toBe(a.ports[0]); // the model reuses the parsed port
    expect(port.clusterEndpoints).toBe(EndpointList.EMPTY);
    expect(port.localEndpoints).toBe(EndpointList.EMPTY);
    expect(item.service!.clusterIps.v6).toBe(item.service!.loadBalancerSourceRanges);
  });

  test('orEmpty keeps a list that has something', () => {
    const xs = ['a'];
    expect(orEmpty(xs)).toBe(xs);
  });

  test('an interner returns the first value for a key, and starts over past its bound', () => {
    const t = new Interner<string[]>(2);
    const first = ['x'];
    expect(t.intern('k', first)).toBe(first);
    expect(t.intern('k', ['x'])).toBe(first);
    t.intern('k2', []);
    t.intern('k3', []); // over the bound: the table starts over
    const again = ['x'];
    expect(t.intern('k', again)).toBe(again);
  });

  test("a service's node dependence: names and zones sorted, each once; nodeClass finds every name", () => {
    const a = parsed(parseService(svc('a', [{ name: 'http', port: 80 }])));
    const names = Array.from({ length: 37 }, (_, i) => `node-${(i * 7) % 37}`);
    const s = parsed(parseEndpointSlice({
      metadata: { namespace: 'd', name: 'a-1', labels: { 'kubernetes.io/service-name': 'a' } }, addressType: 'IPv4',
      ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
      endpoints: [...names, 'node-3'].map((n, i) => ({ addresses: [`10.0.1.${i + 1}`], nodeName: n, hints: { forZones: [{ name: i % 2 ? 'zb' : 'za' }] } })),
    })).slice;
    const dep = nodeDependence(a, [s]);
    expect(dep.names).toEqual([...new Set(names)].sort());
    expect(dep.zones).toEqual(['za', 'zb']);
    for (const n of names) expect(nodeClass(dep, { name: n, zone: 'za', primary: [] })).toBeNull();
    expect(nodeClass(dep, { name: 'node-37', zone: 'za', primary: [] })).toBe('za');
    expect(nodeClass(dep, { name: 'node-', zone: 'zc', primary: [] })).toBe('');
    expect(nodeDependence(a, []).names).toEqual([]);
  });

  test('sortedHas', () => {
    const list = ['a', 'b', 'd', 'f', 'g'];
    for (const x of list) expect(sortedHas(list, x)).toBe(true);
    for (const x of ['', 'c', 'e', 'h', 'aa']) expect(sortedHas(list, x)).toBe(false);
    expect(sortedHas([], 'a')).toBe(false);
  });
});

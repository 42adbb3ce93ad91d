// A slice's endpoints by column (src/model/slice-endpoints.ts): what goes in comes out, endpoint by
// endpoint, and the columns a cluster repeats are shared.
import { parseEndpointSlice } from '../src/model/parse';
import type { Family, SliceEndpoint, SliceSpec } from '../src/model/objects';
import { portEndpoints } from '../src/model/compute';
import { Protocol } from '../src/model/enls';
import { hostPort } from '../src/model/ip';
import type { PortEndpoint } from '../src/model/topology';
import { SliceEndpoints } from '../src/model/slice-endpoints';

const ep = (ip: string, o: Partial<SliceEndpoint> = {}): SliceEndpoint =>
  ({ ip, ready: true, serving: true, terminating: false, nodeName: 'n1', zoneHints: null, nodeHints: null, ...o });

describe('SliceEndpoints', () => {
  test('every field of every endpoint reads back as it went in', () => {
    const input = [
      ep('10.0.0.1'),
      ep('10.0.0.2', { ready: false, serving: true, terminating: true, nodeName: null }),
      ep('10.0.0.3', { ready: false, serving: false, terminating: true, zoneHints: ['a', 'b'] }),
      ep('10.0.0.4', { nodeHints: ['n2'] }),
      ep('10.0.0.5', { ready: false, serving: false, terminating: false, zoneHints: ['c'], nodeHints: ['n1', 'n3'] }),
    ];
    const cols = SliceEndpoints.of(input);
    expect(cols.length).toBe(5);
    expect(cols.toArray()).toEqual(input);
    expect(cols.terminating(1)).toBe(true);
    expect(cols.serving(2)).toBe(false);
    expect(cols.zoneHints(0)).toBeNull();
    expect(cols.nodeHints(4)).toEqual(['n1', 'n3']);
  });

  test('no endpoints', () => {
    const cols = SliceEndpoints.of([]);
    expect(cols.length).toBe(0);
    expect(cols.toArray()).toEqual([]);
  });

  test('slices with the same conditions share one string, and a slice without hints keeps no hint column', () => {
    const a = SliceEndpoints.of([ep('10.0.0.1'), ep('10.0.0.2')]);
    const b = SliceEndpoints.of([ep('10.0.1.1'), ep('10.0.1.2')]);
    const c = SliceEndpoints.of([ep('10.0.1.1'), ep('10.0.1.2', { ready: false })]);
    const conditions = (s: SliceEndpoints) => (s as unknown as { conditions: string }).conditions;
    expect(conditions(a)).toBe(conditions(b));
    expect(conditions(c)).not.toBe(conditions(a));
    expect((a as unknown as { hints: unknown }).hints).toBeNull();
  });

  test('a parsed slice keeps its endpoints by column, invalid ones dropped', () => {
    const r = parseEndpointSlice({
      metadata: { namespace: 'd', name: 's-1', labels: { 'kubernetes.io/service-name': 's' } }, addressType: 'IPv4',
      ports: [{ name: 'p', protocol: 'TCP', port: 80 }],
      endpoints: [
        { addresses: ['10.0.0.1'], conditions: { ready: true }, nodeName: 'n1', hints: { forZones: [{ name: 'z2' }, { name: 'z1' }] } },
        { addresses: ['fd00::1'] },
        { addresses: ['10.0.0.2'], conditions: { ready: false, terminating: true } },
      ],
    });
    if (!r.ok) throw new Error(r.reason);
    expect(r.value.skipped).toHaveLength(1);
    expect(r.value.slice.endpoints.toArray()).toEqual([
      ep('10.0.0.1', { zoneHints: ['z1', 'z2'] }),
      ep('10.0.0.2', { ready: false, serving: true, terminating: true, nodeName: null }),
    ]);
  });
});

describe('portEndpoints', () => {
  // The rule as first written: a Map by "addr:port" text, first slice wins, sorted by that text.
  const reference = (portName: string, slices: SliceSpec[], family: Family): PortEndpoint[] => {
    const byKey = new Map<string, PortEndpoint>();
    for (const slice of slices) {
      if (slice.family !== family) continue;
      const sp = slice.ports.find((p) => p.name === portName && p.protocol === Protocol.TCP);
      if (!sp) continue;
      for (const ep of slice.endpoints.toArray()) {
        const key = hostPort(ep.ip, sp.port);
        if (!byKey.has(key)) byKey.set(key, { ...ep, port: sp.port });
      }
    }
    return [...byKey.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((e) => e[1]);
  };

  test('the same endpoints in the same order as the reference: prefixes, duplicates, several slices and ports, both families', () => {
    let seed = 7;
    const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
    const pools: Record<Family, string[]> = {
      IPv4: ['10.0.0.1', '10.0.0.10', '10.0.0.100', '10.0.0.2', '10.0.1.1', '9.0.0.1', '10.0.0.19'],
      IPv6: ['fd00::1', 'fd00::10', 'fd00::1:0', 'fd00::a', 'fd00::', 'fd00::1a', '2001:db8::1'],
    };
    for (let round = 0; round < 400; round++) {
      const family: Family = rnd(2) ? 'IPv4' : 'IPv6';
      const slices: SliceSpec[] = Array.from({ length: 1 + rnd(3) }, (_, s) => ({
        namespace: 'd', name: `s-${s}`, service: 's', family: rnd(6) ? family : (family === 'IPv4' ? 'IPv6' : 'IPv4'),
        ports: rnd(8) ? [{ name: 'http', protocol: Protocol.TCP, port: [80, 8080, 9, 443][round % 3 === 0 ? rnd(4) : 0]! }] : [],
        endpoints: SliceEndpoints.of(Array.from({ length: rnd(9) }, () => ep(pools[family][rnd(7)]!, { ready: !!rnd(3), nodeName: `n${rnd(3)}` }))),
      }));
      expect(portEndpoints('http', Protocol.TCP, slices, family)).toEqual(reference('http', slices, family));
    }
  });
});

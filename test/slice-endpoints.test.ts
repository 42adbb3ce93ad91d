// A slice's endpoints by column (src/model/slice-endpoints.ts): what goes in comes out, endpoint by
// endpoint, and the columns a cluster repeats are shared.
import { parseEndpointSlice } from '../src/model/parse';
import type { SliceEndpoint } from '../src/model/objects';
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

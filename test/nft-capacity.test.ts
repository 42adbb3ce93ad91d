// The nft backend's sized sets in the REAL kernel (a throwaway netns): the kernel holds a set to the
// capacity it was created with, and the backend turns an update that would overflow one into a full
// sync that sizes it again, so the batch never fails.
import type { Item } from '../src/model/enls';
import { modelOptions } from '../src/model/options';
import type { Batch, StateView } from '../src/sink/sink';
import { createNftSink } from '../src/backend/nft';
import { NftBatch, nftApply, type NftApplyError } from '../src/native';
import { cluster, ep, slice, svc as svcObj } from './helpers/k8s';
import { Netns } from './helpers/netns';
import { gated, need } from './helpers/gate';

const maybe = gated(need.netns()).describe;

/** The ENLS item of service ns/<name> (TCP 80 -> 8080) with `n` endpoints on this node (n1) from `from` on. */
function svc(name: string, from: number, n: number): Item {
  const eps = Array.from({ length: n }, (_, i) => ep(`10.244.${(from + i) >> 8}.${(from + i) & 255}`, { node: 'n1' }));
  // EndpointSlices hold at most 1,000 endpoints.
  const slices = [];
  for (let i = 0; i < eps.length; i += 1000) slices.push(slice(`${name}-${i}`, name, eps.slice(i, i + 1000), { ns: 'ns', ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] }));
  const clusterIPs = [`10.96.0.${name.charCodeAt(0)}`];
  const c = cluster('n1', [svcObj(name, { ns: 'ns', clusterIPs, ports: [{ name: 'p', protocol: 'TCP', port: 80 }] }), ...slices], { model: modelOptions({ clusterCIDRs: ['10.244.0.0/16'] }) });
  return c.state.get(`svc/ns/${name}`)!;
}

function view(items: Item[]): StateView {
  const m = new Map(items.map((x) => [x.key, x]));
  return { node: 'n1', revision: 1, get: (k) => m.get(k), items: () => m.values(), size: m.size };
}

const batch = (revision: number, items: Item[], reset = false): Batch => ({ revision, reset, changes: items.map((item) => ({ op: 'set' as const, key: item.key, item })) });

maybe('nft sized sets in the kernel', () => {
  let ns: Netns;
  beforeEach(() => { ns = new Netns(); });
  afterEach(() => ns.destroy());

  const hairpin = () => {
    const text = ns.nft('list', 'set', 'ip', 'kpng', 'hairpin');
    return { size: Number(/size (\d+)/.exec(text)?.[1]), elements: (text.match(/10\.244\.\d+\.\d+ \. 10\.244/g) ?? []).length };
  };

  test('the kernel refuses elements beyond a set\'s size (ENFILE)', async () => {
    const b = new NftBatch();
    b.add({ op: 'add', table: { family: 'ip', name: 'kpng' } });
    b.add({ op: 'add', set: { family: 'ip', table: 'kpng', name: 's', keyType: 'ipv4_addr', size: 2 } });
    b.add({ op: 'add', elements: { family: 'ip', table: 'kpng', set: 's', elements: [1, 2, 3].map((i) => ({ key: Uint8Array.from([10, 0, 0, i]) })) } });
    const err = await nftApply(b, { netns: ns.path }).then(() => undefined, (e: NftApplyError) => e);
    expect(err?.failed?.[0]?.code).toBe('ENFILE');
  });

  test('an update beyond a capacity becomes a full sync, and the kernel gets everything', async () => {
    const logs: string[] = [];
    const sink = createNftSink({ log: (m) => logs.push(m), netns: ns.path });
    try {
      const a = svc('a', 0, 600);
      await sink.apply(batch(1, [a], true), view([a]));
      expect(hairpin()).toEqual({ size: 1024, elements: 600 });
      const b = svc('b', 600, 600);
      await sink.apply(batch(2, [b]), view([a, b]));
      expect(hairpin()).toEqual({ size: 2048, elements: 1200 });
      expect(logs.some((l) => /revision 2: full \(2 services, set ip hairpin would hold 1200 elements, it was created for 1024\) sync/.test(l))).toBe(true);
      expect(logs.some((l) => /failed/.test(l))).toBe(false);
      // Incremental again afterwards.
      const b2 = svc('b', 600, 590);
      await sink.apply(batch(3, [b2]), view([a, b2]));
      expect(hairpin()).toEqual({ size: 2048, elements: 1190 });
      expect(logs[logs.length - 1]).toMatch(/revision 3: incremental/);
    } finally {
      await sink.close?.();
    }
  });
});

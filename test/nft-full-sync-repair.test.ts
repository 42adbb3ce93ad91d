// A full sync of a table kpng knows (every batch since the last full sync committed) repairs it in
// place: the ClientIP affinity sets keep what the packets wrote in them, and the table ends up as a
// full sync from nothing would leave it. An unknown table (the first sync, or after a failed batch)
// is replaced whole. Fake tables here; test/e2e/nft-full-sync-repair.test.ts does it in the kernel.
import { NftDataplane, type NftKernel } from '../src/backend/nft/sink';
import type { FamOps } from '../src/backend/nft/types';
import type { Service } from '../src/model/enls';
import { cluster, ep, slice, svc } from './helpers/k8s';
import { FakeNft, tableContent } from '../src/backend/nft/fake';
import { Tracer } from './helpers/nft-tracer';
import { enlsOf, renderFull } from './helpers/nft-world';

type Obj = Record<string, unknown>;
const POD = '10.0.0.2';
const p80 = [{ name: 'p80', protocol: 'TCP', port: 80 }];
const eps = (name: string, ips: string[]): Obj => slice(`${name}-1`, name, ips.map((ip) => ep(ip, { node: 'n2' })), { ports: p80 });

/** The fake tables as the dataplane's kernel; `failNext` makes the next batch fail (nothing applied). */
function fakeKernel(nft: FakeNft) {
  const k = {
    failNext: false,
    batches: [] as FamOps[][],
    async apply(_table: string, ops: FamOps[]) {
      if (k.failNext) { k.failNext = false; throw new Error('EPERM: refused by the test'); }
      nft.apply(ops);
      k.batches.push(ops);
      return { messages: 1, bytes: 0, ms: 0 };
    },
    async conntrackDelete() { return 0; },
  };
  return k satisfies NftKernel;
}

function servicesOf(objects: Obj[]): { services: Service[]; pairs: Array<[string, Service]> } {
  const { services } = enlsOf(cluster('n1', objects).state);
  return { services: services.map(([, s]) => s), pairs: services };
}

const affinity = (timeout = 100) => svc('aff', { clusterIPs: ['172.30.0.41'], affinity: timeout, ports: p80 });
const plain = (name: string, ip: string) => svc(name, { clusterIPs: [ip], ports: p80 });

describe('a full sync of a known table repairs it in place', () => {
  test('the affinity a client got survives the periodic full sync; after a failed batch the table is replaced', async () => {
    const nft = new FakeNft();
    const kernel = fakeKernel(nft);
    const dp = new NftDataplane('kpng', kernel);
    const { services } = servicesOf([affinity(), eps('aff', ['10.180.0.1', '10.180.2.1'])]);
    await dp.fullSync(services, undefined);
    expect(kernel.batches[0][0].ops[0]).toEqual({ kind: 'resetTable' });
    const t = new Tracer(nft, { localAddrs: [] });
    const pkt = { src: POD, dst: '172.30.0.41', dport: 80 };
    t.trace(pkt, '10.180.2.1:80');
    expect(t.trace(pkt).endpoints).toEqual(['10.180.2.1:80']);

    await dp.fullSync(services, undefined);   // what the runner asks for every --sync-period
    expect(kernel.batches[1][0].ops[0]).toEqual({ kind: 'addTable' });
    expect(t.trace(pkt).endpoints).toEqual(['10.180.2.1:80']);

    kernel.failNext = true;
    await expect(dp.fullSync(services, undefined)).rejects.toThrow(/EPERM/);
    await dp.fullSync(services, undefined);
    expect(kernel.batches[2][0].ops[0]).toEqual({ kind: 'resetTable' });
    expect(t.trace(pkt).endpoints).toEqual(['10.180.0.1:80', '10.180.2.1:80']);
  });

  test('whatever came before, the repaired table is the one a full sync from nothing makes', async () => {
    const ips = (n: number, base: number) => Array.from({ length: n }, (_, i) => `10.${180 + base}.${i >> 8}.${i & 255}`);
    const states: Obj[][] = [
      [affinity(), eps('aff', ['10.180.0.1', '10.180.2.1']), plain('a', '172.30.0.1'), eps('a', ips(3, 1))],
      // The affinity timeout changes (a new set), a service goes, another comes.
      [affinity(200), eps('aff', ['10.180.0.1']), plain('b', '172.30.0.2'), eps('b', ips(2, 2))],
      // Enough endpoints to resize the sized sets (1,100 > the first capacity of 1,024).
      [plain('b', '172.30.0.2'), eps('b', ips(1100, 2))],
      // And back to nothing at all.
      [],
    ];
    const nft = new FakeNft();
    const dp = new NftDataplane('kpng', fakeKernel(nft));
    for (const objects of states) {
      const { services, pairs } = servicesOf(objects);
      await dp.fullSync(services, undefined);
      const fresh = renderFull(pairs, undefined);
      for (const fam of ['ip', 'ip6'] as const) expect(tableContent(nft.tables[fam])).toEqual(tableContent(fresh.tables[fam]));
      // And as the kernel holds it, expressions and element bytes: the sorted dumps are equal.
      expect(nft.dump()).toEqual(fresh.dump());
    }
  });
});

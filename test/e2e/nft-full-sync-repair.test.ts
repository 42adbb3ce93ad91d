// The nft full sync in the kernel: it tells when only the kernel's part is left, and it repairs a
// known table in place (src/backend/nft/kernel-objects.ts):
// the batch is accepted, an affinity set keeps the element a client's packets put there, and after a
// run of different states the table lists as a full sync from nothing in a fresh namespace makes it.
import { NftDataplane, nativeKernel } from '../../src/backend/nft';
import type { Service } from '../../src/model/enls';
import { cluster, ep, slice, svc } from '../helpers/k8s';
import { gated, need } from '../helpers/gate';
import { Netns } from '../helpers/netns';
import { diffFakes } from '../helpers/nft-compare';
import { kernelFake } from '../helpers/nft-lift';
import { nftList } from '../helpers/nft-list';
import { enlsOf } from '../helpers/nft-world';

const d = gated(need.netns(), need.native()).describe;

type Obj = Record<string, unknown>;
const TABLE = 'kpng-rep';
const p80 = [{ name: 'p80', protocol: 'TCP', port: 80 }];
const eps = (name: string, ips: string[]): Obj => slice(`${name}-1`, name, ips.map((ip) => ep(ip, { node: 'n2' })), { ports: p80 });
const affinity = (timeout: number) => svc('aff', { clusterIPs: ['172.30.0.41'], affinity: timeout, ports: p80 });
const plain = (name: string, ip: string) => svc(name, { clusterIPs: [ip], ports: p80 });
const ips = (n: number, base: number) => Array.from({ length: n }, (_, i) => `10.${180 + base}.${i >> 8}.${i & 255}`);
const servicesOf = (objects: Obj[]): Service[] => enlsOf(cluster('n1', objects).state).services.map(([, s]) => s);

async function listed(ns: Netns) {
  return kernelFake({ ip: await nftList('ip', TABLE, { netns: ns.path }), ip6: await nftList('ip6', TABLE, { netns: ns.path }) });
}

d('nft full sync of a known table, in the kernel', () => {
  let ns: Netns;
  let fresh: Netns;
  beforeAll(() => { ns = new Netns('rep'); fresh = new Netns('rep'); });
  afterAll(() => { ns?.destroy(); fresh?.destroy(); });

  test('a periodic full sync keeps the client in the affinity set; a failed batch makes the next one replace the table', async () => {
    const dp = new NftDataplane(TABLE, nativeKernel({ netns: ns.path }));
    try {
      const services = servicesOf([affinity(300), eps('aff', ['10.180.0.1', '10.180.2.1'])]);
      await dp.fullSync(services, undefined);
      const set = /set (aff\S*) \{/.exec(ns.nft('list', 'sets', 'ip'))?.[1];
      expect(set).toBeDefined();
      // What `update @set { ip saddr }` writes when the client's first packet goes through.
      ns.nft('add', 'element', 'ip', TABLE, set!, '{ 10.0.0.2 }');
      const elements = () => ns.nft('list', 'set', 'ip', TABLE, set!);
      expect(elements()).toMatch(/10\.0\.0\.2 (timeout \S+ )?expires/);

      await dp.fullSync(services, undefined);
      expect(elements()).toMatch(/10\.0\.0\.2 (timeout \S+ )?expires/);

      // A batch the kernel refuses (a table deleted behind kpng's back makes the repair's flushes fail
      // here): the table is no longer known, and the next full sync replaces it.
      ns.nft('delete', 'table', 'ip', TABLE);
      await expect(dp.fullSync(services, undefined)).rejects.toThrow();
      await dp.fullSync(services, undefined);
      expect(elements()).not.toMatch(/10\.0\.0\.2/);
    } finally {
      await dp.close();
    }
  });

  test('a full sync says when only the kernel\'s part is left (the eBPF backend plans its socket LB then), before the transaction ends', async () => {
    const own = new Netns('rep');
    const dp = new NftDataplane(TABLE, nativeKernel({ netns: own.path }));
    try {
      const services = servicesOf([plain('w', '172.30.0.9'), eps('w', ips(2000, 9))]);
      const events: string[] = [];
      const synced = dp.fullSync(services, undefined, 1, () => events.push('waiting')).then(() => events.push('committed'));
      await synced;
      expect(events).toEqual(['waiting', 'committed']);
      expect(own.nft('list', 'table', 'ip', TABLE)).toContain('172.30.0.9');
    } finally {
      await dp.close();
      own.destroy();
    }
  });

  test('after any run of states, the repaired table lists as a full sync from nothing makes it', async () => {
    const states: Obj[][] = [
      [affinity(100), eps('aff', ['10.180.0.1', '10.180.2.1']), plain('a', '172.30.0.1'), eps('a', ips(3, 1))],
      [affinity(200), eps('aff', ['10.180.0.1']), plain('b', '172.30.0.2'), eps('b', ips(2, 2))],
      [plain('b', '172.30.0.2'), eps('b', ips(1100, 2))],
      [plain('c', '172.30.0.3'), eps('c', ips(1, 3))],
    ];
    const dp = new NftDataplane(TABLE, nativeKernel({ netns: ns.path }));
    try {
      for (const [i, objects] of states.entries()) {
        const services = servicesOf(objects);
        await dp.fullSync(services, undefined);
        const once = new NftDataplane(TABLE, nativeKernel({ netns: fresh.path }));
        try {
          fresh.nft('flush', 'ruleset');
          await once.fullSync(services, undefined);
        } finally {
          await once.close();
        }
        expect({ state: i, diff: diffFakes((await listed(fresh)).tables, (await listed(ns)).tables) }).toEqual({ state: i, diff: [] });
      }
    } finally {
      await dp.close();
    }
  });
});

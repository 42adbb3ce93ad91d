// `--to ipvs --aggregator` with real packets, in a kernel that has IPVS (the qemu guest,
// hack/qemu/test-guest.sh): the IPVS backend's companion table goes to the node's aggregator as
// producer "kpng" (its tables in the aggregator's status) and its IPVS messages are sent in the
// aggregator's per-tick IPVS batches; an outside producer's table sits beside the companion; a refused
// IPVS message is mapped back to kpng and repaired by kpng's full resync.
process.env.KPNG_LAB_PREFIX ??= 'ka3';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Lab, ADDR, PODS } from './lab/lab';
import { StateFile, type SvcSpec } from './lab/world';
import { KpngIpvs, ipvsadm, realServers } from './ipvs/harness';
import { aggregatorStatus, ProducerClient } from '../../src/aggregator/client';
import type { ProducerStatus } from '../../src/aggregator';

const podIP = (n: string) => PODS.find((p) => p.name === n)!.v4;
const N1 = ADDR.n1.v4;

const web: SvcSpec = {
  name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'],
  ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080, nodePort: 30081 }],
  pods: ['p1a', 'p1b', 'p2a'],
};
const empty: SvcSpec = { name: 'empty', type: 'NodePort', clusterIPs: ['10.96.0.40'], ports: [{ port: 80, targetPort: 8080, nodePort: 30040 }], pods: [] };
const extra: SvcSpec = { name: 'extra', clusterIPs: ['10.96.0.11'], ports: [{ port: 80, targetPort: 8080 }], pods: ['p1a', 'p2a'] };

describe('IPVS backend through the aggregator (guest kernel)', () => {
  let lab: Lab;
  let kpng: KpngIpvs;
  let state: StateFile;
  const dir = fs.mkdtempSync('/tmp/ka3-');
  const sock = `unix://${path.join(dir, 'agg.sock')}`;
  const names = (rs: { name?: string }[]) => new Set(rs.map((r) => r.name));
  const status = async () => new Map(((await aggregatorStatus(sock)) as ProducerStatus[]).map((s) => [s.name, s]));
  const set = async (svcs: SvcSpec[]) => {
    const before = kpng.syncs;
    state.write(svcs);
    await kpng.waitSyncs(before + 1);
  };

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write([web, empty]);
    kpng = new KpngIpvs(lab, state.file, ['--aggregator', '--aggregator-listen', sock]);
    await kpng.start();
  }, 180000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts) {
      // eslint-disable-next-line no-console
      console.log(`kpng log:\n${kpng.log}\n\nipvsadm:\n${ipvsadm(lab, lab.ns.n1)}\n\n${lab.nftList(lab.ns.n1)}`);
    }
  });

  test('serves real packets; the companion table is owned by producer kpng; IPVS messages went in aggregator batches', async () => {
    const tcp = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.10', 80, 12);
    expect(tcp.every((r) => r.ok)).toBe(true);
    expect(names(tcp)).toEqual(new Set(['p1a', 'p1b', 'p2a']));
    expect((await lab.probe(lab.ns.p1b, 'udp', '10.96.0.10', 80, 4)).every((r) => r.ok)).toBe(true);
    // Node port from outside: masqueraded by the companion table (endpoints on n2 answer through n1).
    const np = await lab.probe(lab.ns.client, 'tcp', N1, 30080, 6);
    expect(np.every((r) => r.ok && r.peer !== ADDR.client.v4)).toBe(true);
    // No endpoints: rejected by the companion table.
    expect((await lab.probe(lab.ns.client, 'tcp', N1, 30040, 1, 3000))[0]).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    const k = (await status()).get('kpng')!;
    expect(k.tables).toEqual(['ip kpng-ipvs', 'ip6 kpng-ipvs']);
    expect(k.last).toMatchObject({ ok: true });
    expect(k.ipvs!.messages).toBeGreaterThan(0);
    expect(k.ipvs!.last).toMatchObject({ ok: true });
    expect(kpng.log).toMatch(/aggregator: producer kpng connected/);
  });

  test('a change lands through both subsystems; an outside producer\'s table sits beside the companion', async () => {
    const before = (await status()).get('kpng')!.ipvs!.batches;
    await set([web, empty, extra]);
    expect(realServers(lab, lab.ns.n1, 'tcp', '10.96.0.11:80')).toEqual(['p1a', 'p2a'].map((p) => `${podIP(p)}:8080 1`).sort());
    expect(names(await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.11', 80, 8))).toEqual(new Set(['p1a', 'p2a']));
    expect((await status()).get('kpng')!.ipvs!.batches).toBeGreaterThan(before);
    // A firewall producer drops the outside client before IPVS; removing it lets the client in again.
    const fw = await ProducerClient.connect(sock, 'ka3-fw');
    try {
      await fw.declare({ tables: [{ family: 'ip', name: 'ka3-fw', sets: [{ name: 'deny', type: 'ipv4_addr', elements: [ADDR.client.v4] }],
        chains: [{ name: 'pre', hook: 'prerouting', type: 'filter', priority: -300, rules: [{ match: { saddr: '@deny' }, verdict: 'drop' }] }] }] });
      expect((await lab.probe(lab.ns.client, 'tcp', N1, 30080, 1, 1500))[0]).toMatchObject({ ok: false, err: 'timeout' });
      expect((await status()).get('ka3-fw')!.tables).toEqual(['ip ka3-fw']);
      expect((await status()).get('kpng')!.tables).toEqual(['ip kpng-ipvs', 'ip6 kpng-ipvs']);
      await fw.patch({ delete: { tables: [{ family: 'ip', name: 'ka3-fw' }] } });
      expect((await lab.probe(lab.ns.client, 'tcp', N1, 30080, 4)).every((r) => r.ok)).toBe(true);
    } finally {
      fw.close();
    }
  });

  test('a refused IPVS message is mapped back to kpng, whose full resync repairs the kernel', async () => {
    const fullSyncs = () => kpng.log.split('\n').filter((l) => /ipvs: revision \d+: full \(.*\) sync, /.test(l)).length;
    const fullBefore = fullSyncs();
    // Behind kpng's back: its virtual server goes. The next change adds a real server to it: refused.
    lab.exec(lab.ns.n1, 'ipvsadm', ['-D', '-t', '10.96.0.10:80']);
    state.write([{ ...web, pods: [...web.pods, 'p2b'] }, empty, extra]);
    await kpng.waitLog(/aggregator: ipvs: producer kpng: addDest tcp 10\.96\.0\.10:80 -> [\d.]+:8080: \w+ \(1 of \d+ messages refused\)/);
    await kpng.waitLog(/ipvs: revision \d+: .*sync failed .*next sync is a full one/);
    for (const t0 = Date.now(); fullSyncs() === fullBefore; await new Promise((r) => setTimeout(r, 100))) {
      if (Date.now() - t0 > 30000) throw new Error(`no full sync after the failure; log:\n${kpng.log}`);
    }
    expect(realServers(lab, lab.ns.n1, 'tcp', '10.96.0.10:80')).toEqual(['p1a', 'p1b', 'p2a', 'p2b'].map((p) => `${podIP(p)}:8080 1`).sort());
    expect(names(await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.10', 80, 16)).size).toBeGreaterThan(1);
    const k = (await status()).get('kpng')!;
    expect(k.ipvs!.refused).toBeGreaterThanOrEqual(1);
    expect(k.ipvs!.last).toMatchObject({ ok: true });
  });
});

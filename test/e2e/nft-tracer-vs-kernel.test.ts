// The packet tracer's tables checked against the kernel's (issue 37): for clusters that together make
// the planner write every kind of rule, element and set it has, the nft backend's full sync goes
// through the product path (NftDataplane, the native addon) into a throwaway netns; the kernel's
// listing is read back (test/helpers/nft-lift.ts) and compared with the table the flow tests trace
// over for the same cluster (test/helpers/nft-world.ts), line by line; then the tracer runs over
// both tables and must give every packet the same fate. The flow tests (test/nft-tracer.test.ts,
// test/nft-detect-local.test.ts) thus rest on a fake that is checked against the kernel.
import { NftDataplane, nativeKernel, type NftKernel } from '../../src/backend/nft';
import type { IpFamily, L4, SetKind, Stmt } from '../../src/backend/nft/types';
import { ep, node, slice, svc } from '../helpers/k8s';
import { gated, need } from '../helpers/gate';
import { Netns } from '../helpers/netns';
import { diffFakes, diffTables } from '../helpers/nft-compare';
import { kernelFake } from '../helpers/nft-lift';
import { nftList } from '../helpers/nft-list';
import { FakeNft, type FakeTable } from '../../src/backend/nft/fake';
import { Tracer, type Packet } from '../helpers/nft-tracer';
import { brief, enlsOf, nftWorld, type WorldOptions } from '../helpers/nft-world';

const d = gated(need.netns(), need.native(), need.testNative()).describe;

type Obj = Record<string, unknown>;

const NODE_IP = '192.168.0.2';
const NODE_IP_ALT = '192.168.1.2';
const NODE_IP6 = '2001:db8::2';
const PODS = ['10.0.0.0/8', 'fd00:10::/64'];

const thisNode = (o: { v6?: boolean; podCIDRs?: string[] } = {}): Obj => ({
  ...node('n1', 'zone-a', {
    addresses: [
      { type: 'InternalIP', address: NODE_IP }, { type: 'ExternalIP', address: NODE_IP_ALT },
      ...(o.v6 ? [{ type: 'InternalIP', address: NODE_IP6 }] : []),
    ],
  }),
  ...(o.podCIDRs ? { spec: { podCIDRs: o.podCIDRs } } : {}),
});
const tcp = (port: number, nodePort?: number, name = `p${port}`): Obj => ({ name, protocol: 'TCP', port, ...(nodePort ? { nodePort } : {}) });
const ports = (...p: Obj[]): Obj[] => p.map((x) => ({ name: x.name, protocol: x.protocol, port: x.port }));

/** One service of each kind the planner handles, in one family (names end in -6 for IPv6). */
function everyKind(v6: boolean): Obj[] {
  const sfx = v6 ? '-6' : '';
  const fam = v6 ? { extraSpec: { ipFamilies: ['IPv6'] } } : {};
  const family = v6 ? 'IPv6' : undefined;
  const cip = (n: number) => [v6 ? `fd00:30::${n}` : `172.30.0.${n}`];
  const lb = (n: number) => [v6 ? `2001:db8:1::${n}` : `1.2.3.${n}`];
  const ext = (n: number) => [v6 ? `2001:db8:99::${n}` : `192.168.99.${n}`];
  // Pods: 10.180.<node>.<n> / fd00:10::<node>:<n> (this node is 0).
  const pod = (nodeNum: number, n: number) => (v6 ? `fd00:10::${nodeNum}:${n}` : `10.180.${nodeNum}.${n}`);
  const here = (n: number) => ep(pod(0, n), { node: 'n1' });
  const there = (n: number, nodeNum = 2) => ep(pod(nodeNum, n), { node: `n${nodeNum}` });
  const svc6 = (name: string, o: Parameters<typeof svc>[1]) => svc(`${name}${sfx}`, { ...o, extraSpec: { ...o?.extraSpec, ...fam.extraSpec } });
  const eps6 = (name: string, endpoints: Obj[], p: Obj[]) => slice(`${name}${sfx}-1`, `${name}${sfx}`, endpoints, { ports: ports(...p), ...(family ? { family } : {}) });
  const term = (n: number) => ep(pod(2, n), { node: 'n2', ready: false, serving: true, terminating: true });
  const web = [tcp(80), { name: 'dns', protocol: 'UDP', port: 53 }, { name: 'sc', protocol: 'SCTP', port: 9000 }];
  return [
    // Cluster IP, three protocols, local and remote endpoints (hairpin, pick maps, masquerade by class).
    svc6('web', { clusterIPs: cip(41), ports: web }), eps6('web', [here(1), there(1), there(1, 3)], web),
    // Node port, external IP and load balancer with source ranges (one holding the node); policy Cluster.
    svc6('lb', {
      type: 'LoadBalancer', clusterIPs: cip(42), externalIPs: ext(11), lbIPs: [...lb(4), ...lb(5)], ports: [tcp(80, 30080)],
      sourceRanges: v6 ? ['2001:db8::/64', '2001:db8:ffff::/48'] : ['192.168.0.0/24', '203.0.113.0/25'],
    }),
    eps6('lb', [there(2)], [tcp(80)]),
    // externalTrafficPolicy Local with and without a local endpoint.
    svc6('etp-here', { type: 'LoadBalancer', etp: 'Local', clusterIPs: cip(43), lbIPs: lb(6), ports: [tcp(80, 30081)], extraSpec: { healthCheckNodePort: 30000 } }),
    eps6('etp-here', [here(3), there(3)], [tcp(80)]),
    svc6('etp-there', { type: 'LoadBalancer', etp: 'Local', clusterIPs: cip(44), lbIPs: lb(7), externalIPs: ext(12), ports: [tcp(80, 30082)] }),
    eps6('etp-there', [there(4)], [tcp(80)]),
    // internalTrafficPolicy Local: with a local endpoint, and without (dropped; external destinations too).
    svc6('itp-here', { itp: 'Local', clusterIPs: cip(45), ports: [tcp(80)] }), eps6('itp-here', [here(5), there(5)], [tcp(80)]),
    svc6('itp-there', { type: 'NodePort', itp: 'Local', etp: 'Local', clusterIPs: cip(46), ports: [tcp(80, 30083)] }), eps6('itp-there', [there(6)], [tcp(80)]),
    // Terminating endpoints that still serve, used only because none is ready.
    svc6('term', { clusterIPs: cip(47), ports: [tcp(80)] }), eps6('term', [term(7), ep(pod(2, 8), { node: 'n2', ready: false, serving: false, terminating: true })], [tcp(80)]),
    // No endpoints at all: rejected.
    svc6('empty', { type: 'LoadBalancer', clusterIPs: cip(48), lbIPs: lb(8), ports: [tcp(80, 30084)] }),
    // Session affinity, by cluster IP and node port.
    svc6('aff', { type: 'NodePort', clusterIPs: cip(49), affinity: 100, ports: [tcp(80, 30085)] }), eps6('aff', [here(9), there(9)], [tcp(80)]),
  ];
}

/** Both families' services, and one dual-stack service. */
const services = (): Obj[] => [
  ...everyKind(false), ...everyKind(true),
  svc('dual', { type: 'LoadBalancer', clusterIPs: ['172.30.0.50', 'fd00:30::50'], lbIPs: ['1.2.3.10', '2001:db8:1::10'], ports: [tcp(80, 30086)], extraSpec: { ipFamilies: ['IPv4', 'IPv6'] } }),
  slice('dual-v4', 'dual', [ep('10.180.0.10', { node: 'n1' })], { ports: ports(tcp(80)) }),
  slice('dual-v6', 'dual', [ep('fd00:10::10', { node: 'n1' }), ep('fd00:10::2:10', { node: 'n2' })], { ports: ports(tcp(80)), family: 'IPv6' }),
];

interface Cluster { name: string; objects: Obj[]; opts: WorldOptions }

const CLUSTERS: Cluster[] = [
  { name: 'ClusterCIDR, node ports on the primary addresses', objects: [thisNode({ v6: true }), ...services()], opts: { clusterCIDRs: PODS } },
  { name: '--masquerade-all, node ports on CIDRs (one holding loopback)', objects: [thisNode({ v6: true }), ...services()], opts: { clusterCIDRs: PODS, masqueradeAll: true, nodePortAddresses: ['192.168.1.0/24', '96.0.0.0/3', '2001:db8::/64'] } },
  { name: 'no --cluster-cidr, node ports on every address', objects: [thisNode({ v6: true }), ...services()], opts: { nodePortAddresses: ['0.0.0.0/0', '::/0'] } },
  { name: 'BridgeInterface', objects: [thisNode({ v6: true }), ...services()], opts: { detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0' } },
  { name: 'InterfaceNamePrefix', objects: [thisNode({ v6: true }), ...services()], opts: { detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth' } },
  { name: 'NodeCIDR', objects: [thisNode({ v6: true, podCIDRs: ['10.180.0.0/24', 'fd00:10::/112'] }), ...services()], opts: { detectLocalMode: 'NodeCIDR' } },
  { name: 'node ports on localhost only (none), a node without IPv6 address', objects: [thisNode(), ...services()], opts: { clusterCIDRs: PODS, nodePortAddresses: ['localhost'] } },
  { name: 'iptables mode: node ports on every address and on 127.0.0.1', objects: [thisNode({ v6: true }), ...services()], opts: { clusterCIDRs: PODS, nodePortAddresses: ['all'], localhostNodePorts: true } },
  { name: 'iptables mode with node ports on a CIDR holding loopback and the primary address', objects: [thisNode({ v6: true }), ...services()], opts: { clusterCIDRs: PODS, nodePortAddresses: ['96.0.0.0/3', 'primary'], localhostNodePorts: true } },
];

// ---------------------------------------------------------------------------------------------
// Packets: every destination the planned table names, from every kind of client.

const FAMS: IpFamily[] = ['ip', 'ip6'];

function packets(t: Record<IpFamily, FakeTable>, locals: string[], byInterface: boolean): Packet[] {
  const out: Packet[] = [];
  for (const fam of FAMS) {
    const v4 = fam === 'ip';
    const dests: Array<{ dst: string; proto: L4; dport: number }> = [];
    const nodeAddrs = [...locals.filter((a) => a.includes(':') !== v4), v4 ? '127.0.0.1' : '::1'];
    for (const s of t[fam].sets.values()) {
      for (const e of s.elems.values()) {
        if (e.type === 'vip') dests.push({ dst: e.addr, proto: e.proto, dport: e.port });
        if (e.type === 'port') for (const a of nodeAddrs) dests.push({ dst: a, proto: e.proto, dport: e.port });
        if (e.type === 'pair') dests.push({ dst: e.addr, proto: 'tcp', dport: 80 });
        // A cluster IP on a port it does not serve.
        if (e.type === 'addr') dests.push({ dst: e.addr, proto: 'tcp', dport: 81 });
      }
    }
    dests.push({ dst: v4 ? '172.30.0.99' : 'fd00:30::99', proto: 'tcp', dport: 80 });
    const endpoints = [...t[fam].sets.get('hairpin')?.elems.values() ?? []].flatMap((e) => (e.type === 'pair' ? [e.addr] : []));
    const sources = v4
      ? ['10.0.0.2', '10.180.0.77', NODE_IP, NODE_IP_ALT, '203.0.113.2', '203.0.113.130', '192.168.0.5', ...endpoints.slice(0, 2)]
      : ['fd00:10::2', 'fd00:10::2:77', NODE_IP6, '2001:db8:ffff::9', '2001:db8:eeee::9', '2001:db8::5', ...endpoints.slice(0, 2)];
    for (const d of dests) {
      for (const src of [...sources, d.dst]) {
        const local = locals.includes(src) || (src === d.dst && nodeAddrs.includes(src));
        // Interfaces matter only where pods are told by theirs.
        for (const iif of local ? [''] : byInterface ? ['cni0', 'veth1a2b', 'vet', 'eth0'] : ['eth0']) {
          for (const ctNew of [true, false]) out.push({ src, dst: d.dst, dport: d.dport, proto: d.proto, iif, srcIsLocal: local, ctNew });
        }
      }
    }
  }
  return out;
}

function fate(t: Tracer, p: Packet, choose?: string): string {
  try {
    const r = t.trace(p, choose);
    return `${brief(r)} (${r.leaves.length} paths, ${r.leaves.flatMap((l) => l.updates.map((u) => `${u.set}<-${u.addr}`)).sort().join(' ')})`;
  } catch (e) {
    return `error: ${(e as Error).message.split('\n')[0]}`;
  }
}

// ---------------------------------------------------------------------------------------------
// What the clusters must cover between them.

const STMT_KINDS: Record<Stmt['type'], string | null> = {
  vmapVip: null, vmapPort: null, jump: null, goto: null, srcCidr: null, classGoto: null,
  rejectDaddrInSet: null, dnatPick: null, dnat: null, affinityGoto: null, randomGoto: null, affinityUpdate: null, drop: null,
  rejectTcp: null, rejectIcmp: null, hairpinMasq: null, returnIfNoMark: null, clearMark: null, masquerade: null,
  // IPv4 only (localhost node ports): checked below for ip.
  localnetMasq: 'IPv4 only', dropLocalnet: 'IPv4 only',
  // The fast path is opt-in and needs a kernel with flowtables (not this one): checked in test/e2e/fast-path.guest.test.ts.
  flowOffload: 'the fast path needs flowtables (the guest kernel)',
  // src/model/client-routes.ts never refuses pods while it DNATs another class, so a dispatch chain never
  // returns a pod (a return by source CIDR comes from the firewall chains).
  iifReturn: 'the client routes never refuse pods while DNATing other clients',
};
const SET_KINDS: Record<SetKind, string | null> = {
  vipMap: null, portMap: null, pickVipMap: null, pickPortMap: null, pairSet: null, addrSet: null, affinity: null,
};

/** The shapes a table holds: statement kinds and their variants, set kinds, element verdicts. */
function shapes(fam: IpFamily, t: FakeTable): string[] {
  const out = new Set<string>();
  for (const c of t.chains.values()) {
    for (const r of c.rules) {
      out.add(r.type);
      if (r.type === 'classGoto') out.add(`classGoto from ${typeof r.from === 'string' ? r.from : 'cidr' in r.from ? 'cidr' : r.from.prefix ? 'iifname prefix' : 'iifname'}${r.masq ? ' masq' : ''}`);
      if (r.type === 'vmapPort') out.add(`vmapPort${r.ctNew ? ' ct new' : ''}${r.local ? ' local' : ''}${r.daddrCidr ? ' cidr' : ''}${r.exceptLoopback ? ' except loopback' : ''}`);
      if (r.type === 'dnatPick') out.add(`dnatPick ${r.key}`);
      if (r.type === 'dnatPick' || r.type === 'dnat') out.add(`dnat ${r.proto}`);
      if (r.type === 'vmapVip' && r.ctNew) out.add('vmapVip ct new');
    }
  }
  for (const s of t.sets.values()) {
    out.add(`set ${s.spec.kind}`);
    for (const e of s.elems.values()) if (e.type === 'vip' || e.type === 'port') out.add(`${e.type} element ${e.verdict === 'drop' ? 'drop' : 'goto'}`);
  }
  return [...out].map((x) => `${fam} ${x}`);
}

d('the tracer\'s tables are the kernel\'s (nft full sync through the addon)', () => {
  let ns: Netns;
  beforeAll(() => { ns = new Netns('trc'); });
  afterAll(() => ns?.destroy());

  test.each(CLUSTERS.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const w = nftWorld(c.objects, c.opts);
    const dp = new NftDataplane('kpng', nativeKernel({ netns: ns.path }));
    try {
      await dp.fullSync(w.services.map(([, s]) => s), w.node);
    } finally {
      await dp.close();
    }
    const listed = { ip: await nftList('ip', 'kpng', { netns: ns.path }), ip6: await nftList('ip6', 'kpng', { netns: ns.path }) };
    const kernel = kernelFake(listed);
    expect(diffFakes(w.nft.tables, kernel.tables)).toEqual([]);
    // The comparison sees the kernel's side: the plan less one rule, or one element, differs from it.
    const lessRule = w.nft.tables.ip.clone();
    lessRule.chains.get('nat-postrouting')!.rules.shift();
    expect(diffTables(lessRule, kernel.tables.ip).filter((l) => l.startsWith('+'))).toContain('+ chain nat-postrouting rule 0: hairpinMasq {}');
    const lessElem = w.nft.tables.ip.clone();
    const [first] = lessElem.sets.get('cluster-ips')!.elems.keys();
    lessElem.sets.get('cluster-ips')!.elems.delete(first);
    expect(diffTables(lessElem, kernel.tables.ip)).toEqual([expect.stringMatching(/^\+ set cluster-ips element 172\.30\.0\.\d+$/)]);

    // The same fate for every packet over the planned table and over the kernel's.
    const locals = w.node?.addresses ?? [];
    const planned = new Tracer(w.nft, { localAddrs: locals });
    const fromKernel = new Tracer(kernel, { localAddrs: locals });
    const ps = packets(w.nft.tables, locals, !!c.opts.podBridgeInterface || !!c.opts.podInterfaceNamePrefix);
    const fates = ps.map((p) => ({ p, a: fate(planned, p), b: fate(fromKernel, p) }));
    expect(fates.filter((x) => x.a !== x.b)).toEqual([]);
    // Affinity: after a connection to one endpoint, the client sticks to it over both tables.
    let stuck = 0;
    for (const { p, a } of fates) {
      if (!/^DNAT .*,.*<-/.test(a)) continue;
      const to = planned.trace(p).endpoints[0];
      planned.trace(p, to);
      fromKernel.trace(p, to);
      expect(fate(fromKernel, p)).toBe(fate(planned, p));
      expect(planned.trace(p).endpoints).toEqual([to]);
      stuck++;
    }
    expect(stuck).toBeGreaterThan(0);
    // Packets of each verdict were compared (the packets reach the rules, not only pass by).
    expect(new Set(fates.map((x) => x.a.split(' ')[0]))).toEqual(new Set(['DNAT', 'DROP', 'REJECT', 'ACCEPT']));
  });

  test('incremental updates: the fake applies the batches the dataplane sends as the kernel does', async () => {
    const w = nftWorld(CLUSTERS[0].objects, CLUSTERS[0].opts);
    const fake = new FakeNft();
    const native = nativeKernel({ netns: ns.path });
    // The same batches to the kernel and, once the kernel took them, to the fake.
    const kernel: NftKernel = {
      async apply(table, famOps) {
        const r = await native.apply(table, famOps);
        fake.apply(famOps);
        return r;
      },
      conntrackDelete: (f) => native.conntrackDelete(f),
      close: () => native.close!(),
    };
    const dp = new NftDataplane('kpng', kernel);
    const current = () => new Map(enlsOf(w.c.state).services);
    const check = async (step: string) => {
      const listed = { ip: await nftList('ip', 'kpng', { netns: ns.path }), ip6: await nftList('ip6', 'kpng', { netns: ns.path }) };
      expect({ step, diff: diffFakes(fake.tables, kernelFake(listed).tables) }).toEqual({ step, diff: [] });
    };
    try {
      await dp.fullSync([...current().values()], w.node);
      await check('full sync');
      const here = (ip: string) => ep(ip, { node: 'n1' });
      const there = (ip: string) => ep(ip, { node: 'n2' });
      const p80 = [{ name: 'p80', protocol: 'TCP', port: 80 }];
      const steps: Array<[string, () => void]> = [
        ['web loses an endpoint (other pick chains, fewer slots)', () => w.c.add(slice('web-1', 'web', [here('10.180.0.1'), there('10.180.2.1')], { ports: ports(tcp(80), { name: 'dns', protocol: 'UDP', port: 53 }, { name: 'sc', protocol: 'SCTP', port: 9000 }) }))],
        ['lb\'s endpoint replaced', () => w.c.add(slice('lb-1', 'lb', [there('10.180.2.99')], { ports: p80 }))],
        ['term deleted', () => w.c.del(svc('term', { clusterIPs: ['172.30.0.47'] }))],
        ['empty gets endpoints (reject -> DNAT)', () => w.c.add(slice('empty-1', 'empty', [here('10.180.0.8')], { ports: p80 }))],
        ['aff: another timeout and a third endpoint', () => {
          w.c.add(svc('aff', { type: 'NodePort', clusterIPs: ['172.30.0.49'], affinity: 300, ports: [tcp(80, 30085)] }));
          w.c.add(slice('aff-1', 'aff', [here('10.180.0.9'), there('10.180.2.9'), there('10.180.2.19')], { ports: p80 }));
        }],
        ['itp-here loses its local endpoint (DNAT -> drop)', () => w.c.add(slice('itp-here-1', 'itp-here', [there('10.180.2.5')], { ports: p80 }))],
        ['a new load balancer with source ranges, dual stack', () => {
          w.c.add(svc('new', { type: 'LoadBalancer', clusterIPs: ['172.30.0.60', 'fd00:30::60'], lbIPs: ['1.2.3.60', '2001:db8:1::60'], sourceRanges: ['203.0.113.0/25', '2001:db8:ffff::/48'], ports: [tcp(80, 30090)], extraSpec: { ipFamilies: ['IPv4', 'IPv6'] } }));
          w.c.add(slice('new-1', 'new', [here('10.180.0.60')], { ports: p80 }), slice('new-2', 'new', [there('fd00:10::2:60')], { ports: p80, family: 'IPv6' }));
        }],
        ['lb deleted (its firewall chain goes)', () => w.c.del(svc('lb', { clusterIPs: ['172.30.0.42'] }))],
      ];
      for (const [step, change] of steps) {
        const before = current();
        change();
        const after = current();
        const changes = [...new Set([...before.keys(), ...after.keys()])]
          .filter((k) => before.get(k) !== after.get(k))
          .map((k) => ({ key: k, old: before.get(k) ?? null, new: after.get(k) ?? null }));
        expect({ step, changed: changes.length > 0 }).toEqual({ step, changed: true });
        await dp.update(changes, w.node);
        await check(step);
      }
      // One batch per step, each taken by both.
      expect(fake.batches).toBe(steps.length + 1);
    } finally {
      await dp.close();
    }
  });

  // Read from the planned tables, which the tests above find equal to the kernel's.
  test('the clusters cover every kind of rule, set and element the planner writes', () => {
    const seen = new Set<string>();
    for (const c of CLUSTERS) {
      const w = nftWorld(c.objects, c.opts);
      for (const fam of FAMS) for (const x of shapes(fam, w.nft.tables[fam])) seen.add(x);
    }
    const want: string[] = [];
    for (const fam of FAMS) {
      for (const [k, why] of Object.entries(STMT_KINDS)) if (why === null) want.push(`${fam} ${k}`);
      for (const [k, why] of Object.entries(SET_KINDS)) if (why === null) want.push(`${fam} set ${k}`);
      want.push(...[
        // Pods are masqueraded only with --masquerade-all, and then every class is: one `any` rule.
        'classGoto from cidr', 'classGoto from local masq', 'classGoto from any masq',
        'classGoto from iifname', 'classGoto from iifname prefix', 'vmapPort local', 'vmapPort ct new local', 'vmapPort local cidr',
        'vmapPort ct new local cidr', 'dnatPick vip', 'dnatPick port', 'dnat tcp', 'dnat udp', 'dnat sctp', 'vmapVip ct new',
        'vip element goto', 'vip element drop', 'port element goto', 'port element drop',
      ].map((x) => `${fam} ${x}`));
    }
    want.push('ip vmapPort local cidr except loopback', 'ip localnetMasq', 'ip dropLocalnet');
    expect(want.filter((x) => !seen.has(x))).toEqual([]);
  });
});


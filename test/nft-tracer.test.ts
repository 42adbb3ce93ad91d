// Packet flows through the nft backend's rules, without root: Kubernetes objects -> the model ->
// fullSyncOps -> an in-memory table -> virtual packets (test/helpers/nft-tracer.ts). The cases follow
// upstream's runPacketFlowTests tables (kubernetes pkg/proxy/nftables/proxier_test.go) and its
// conventions: pods 10.0.0.0/8 (this node's pods and endpoints alike), cluster IPs 172.30.0.0/16,
// this node 192.168.0.2, external IP 192.168.99.11, LB IPs 1.2.3.4 / 5.6.7.8, outside 203.0.113.0/24.
import { baseOps } from '../src/backend/nft/base';
import type { Op } from '../src/backend/nft/types';
import { ep, node, slice, svc } from './helpers/k8s';
import { FakeNft, fakeNftTransport, NftFakeError, tableContent } from '../src/backend/nft/fake';
import type { NftOp } from '../src/native/nft-types';
import { TraceError, Tracer } from './helpers/nft-tracer';
import { nftWorld, type WorldOptions } from './helpers/nft-world';

type Obj = Record<string, unknown>;

const NODE_IP = '192.168.0.2';
const NODE_IP_ALT = '192.168.1.2';
const POD = '10.0.0.2';
const OUTSIDE = '203.0.113.2';
const OUTSIDE_BLOCKED = '203.0.113.130';
const EXT_IP = '192.168.99.11';
const LB = '1.2.3.4';
const PODS = ['10.0.0.0/8'];

const thisNode = (extra: Obj = {}): Obj => node('n1', 'zone-a', {
  addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'ExternalIP', address: NODE_IP_ALT }], ...extra,
});
const p80 = (nodePort?: number): Obj[] => [{ name: 'p80', protocol: 'TCP', port: 80, ...(nodePort ? { nodePort } : {}) }];
const eps80 = (name: string, endpoints: Obj[], o: { ns?: string } = {}): Obj => slice(`${name}-1`, name, endpoints, { ns: o.ns, ports: [{ name: 'p80', protocol: 'TCP', port: 80 }] });

interface FlowCase { name: string; src: string; dst: string; dport: number; proto?: 'tcp' | 'udp' | 'sctp'; want: string }

/** Runs one table of cases; every failure names the case and shows the rules the packet matched. */
function flows(w: ReturnType<typeof nftWorld>, cases: FlowCase[]): void {
  const errors: string[] = [];
  for (const c of cases) {
    let got: string;
    try {
      got = w.flow({ src: c.src, dst: c.dst, dport: c.dport, proto: c.proto });
    } catch (e) {
      got = `error: ${(e as Error).message}`;
    }
    if (got !== c.want) {
      const rules = got.startsWith('error') ? '' : w.trace({ src: c.src, dst: c.dst, dport: c.dport, proto: c.proto }).leaves.map((l) => l.rules.join('\n    ')).join('\n  --\n    ');
      errors.push(`${c.name}: ${c.src} -> ${c.dst}:${c.dport}: want "${c.want}", got "${got}"\n    ${rules}`);
    }
  }
  expect(errors).toEqual([]);
}

describe('the fake table follows the kernel', () => {
  const base = (): FakeNft => {
    const nft = new FakeNft();
    nft.applyOps('ip', baseOps('ip', { nodePortAddresses: ['0.0.0.0/0'] }));
    return nft;
  };

  test('a rule for a missing chain, or naming one, is refused and the batch leaves nothing behind', () => {
    const nft = base();
    const before = JSON.stringify(tableContent(nft.tables.ip));
    expect(() => nft.applyOps('ip', [{ kind: 'addChain', chain: { name: 'x' } }, { kind: 'addRule', chain: 'nope', stmt: { type: 'drop' } }])).toThrow(/missing chain nope/);
    expect(() => nft.applyOps('ip', [{ kind: 'addChain', chain: { name: 'x' } }, { kind: 'addRule', chain: 'x', stmt: { type: 'goto', chain: 'nope' } }])).toThrow(/missing chain nope/);
    expect(JSON.stringify(tableContent(nft.tables.ip))).toBe(before);
    expect(nft.tables.ip.chains.has('x')).toBe(false);
  });

  test('a chain in use (by a rule or a map element) or with rules cannot be deleted; a flushed, unused one can', () => {
    const nft = base();
    nft.applyOps('ip', [
      { kind: 'addChain', chain: { name: 'a' } }, { kind: 'addChain', chain: { name: 'b' } },
      { kind: 'addRule', chain: 'a', stmt: { type: 'goto', chain: 'b' } },
      { kind: 'addRule', chain: 'b', stmt: { type: 'dnat', proto: 'tcp', addr: '10.1.1.1', port: 80 } },
      { kind: 'addElems', set: 'vips', elems: [{ type: 'vip', addr: '172.30.0.1', proto: 'tcp', port: 80, verdict: { goto: 'a' } }] },
    ]);
    expect(() => nft.applyOps('ip', [{ kind: 'flushChain', name: 'b' }, { kind: 'delChain', name: 'b' }])).toThrow(/EBUSY: chain b is used by chain a/);
    expect(() => nft.applyOps('ip', [{ kind: 'delChain', name: 'a' }])).toThrow(/EBUSY: chain a still has 1 rule/);
    expect(() => nft.applyOps('ip', [{ kind: 'flushChain', name: 'a' }, { kind: 'delChain', name: 'a' }])).toThrow(/EBUSY: chain a is used by map vips/);
    nft.applyOps('ip', [
      { kind: 'delElems', set: 'vips', elems: [{ type: 'vip', addr: '172.30.0.1', proto: 'tcp', port: 80, verdict: { goto: 'a' } }] },
      { kind: 'flushChain', name: 'a' }, { kind: 'flushChain', name: 'b' }, { kind: 'delChain', name: 'a' }, { kind: 'delChain', name: 'b' },
    ]);
    expect([...nft.tables.ip.chains.keys()]).not.toContain('a');
  });

  test('a set in use cannot be deleted; elements: missing ones cannot be deleted, present ones not re-added with other data', () => {
    const nft = base();
    expect(() => nft.applyOps('ip', [{ kind: 'delSet', name: 'vips' }])).toThrow(/EBUSY: set vips/);
    expect(() => nft.applyOps('ip', [{ kind: 'delElems', set: 'cluster-ips', elems: [{ type: 'addr', addr: '172.30.0.1' }] }])).toThrow(/ENOENT/);
    nft.applyOps('ip', [{ kind: 'addChain', chain: { name: 'a' } }, { kind: 'addElems', set: 'vips', elems: [{ type: 'vip', addr: '172.30.0.1', proto: 'tcp', port: 80, verdict: 'drop' }] }]);
    // The same element again is fine (no NLM_F_EXCL); other data is a clash.
    nft.applyOps('ip', [{ kind: 'addElems', set: 'vips', elems: [{ type: 'vip', addr: '172.30.0.1', proto: 'tcp', port: 80, verdict: 'drop' }] }]);
    expect(() => nft.applyOps('ip', [{ kind: 'addElems', set: 'vips', elems: [{ type: 'vip', addr: '172.30.0.1', proto: 'tcp', port: 80, verdict: { goto: 'a' } }] }])).toThrow(/EEXIST/);
    expect(() => nft.applyOps('ip', [{ kind: 'addElems', set: 'vips', elems: [{ type: 'pick', addr: '10.0.0.1', proto: 'tcp', port: 1, slot: 0, epAddr: '10.0.0.2', epPort: 1 }] }])).toThrow(/EINVAL/);
    expect(() => nft.applyOps('ip', [{ kind: 'addElems', set: 'cluster-ips', elems: [{ type: 'addr', addr: 'fd00::1' }] }])).toThrow(/family ip/);
  });

  test('DNAT only from NAT hooks, no loops, nothing before the table exists', () => {
    const nft = base();
    expect(() => nft.applyOps('ip', [
      { kind: 'addChain', chain: { name: 'd' } },
      { kind: 'addRule', chain: 'd', stmt: { type: 'dnat', proto: 'tcp', addr: '10.1.1.1', port: 80 } },
      { kind: 'addRule', chain: 'filter-input', stmt: { type: 'jump', chain: 'd' } },
    ])).toThrow(/EOPNOTSUPP: dnat in chain d, reachable from filter input/);
    expect(() => nft.applyOps('ip', [
      { kind: 'addChain', chain: { name: 'l1' } }, { kind: 'addChain', chain: { name: 'l2' } },
      { kind: 'addRule', chain: 'l1', stmt: { type: 'jump', chain: 'l2' } }, { kind: 'addRule', chain: 'l2', stmt: { type: 'jump', chain: 'l1' } },
      { kind: 'addRule', chain: 'services', stmt: { type: 'jump', chain: 'l1' } },
    ])).toThrow(/ELOOP/);
    expect(() => new FakeNft().applyOps('ip6', [{ kind: 'addChain', chain: { name: 'x' } }])).toThrow(/no such table/);
  });

  test("one ruleset holds every table, whichever seam its batch came through; NftOps are refused whole", async () => {
    const nft = base();
    await fakeNftTransport(nft).apply([
      { op: 'add', table: { family: 'ip', name: 'kpng-ipvs' } },
      { op: 'add', set: { family: 'ip', table: 'kpng-ipvs', name: 'service-ips', keyType: 'ipv4_addr' } },
    ]);
    expect([...nft.ruleset.keys()].sort()).toEqual(['ip kpng', 'ip kpng-ipvs']);
    const before = nft.dump();
    expect(before).toContain('  chain filter-input ');
    const add = (set: string): NftOp => ({ op: 'add', elements: { family: 'ip', table: 'kpng-ipvs', set, elements: [{ key: new Uint8Array([10, 96, 0, 1]) }] } });
    expect(() => nft.applyNft([add('service-ips'), add('nope')])).toThrow(/ENOENT: op #1: set nope does not exist/);
    expect(nft.dump()).toBe(before);
  });
});

describe('the tracer', () => {
  // A hand-made table: jump returns, goto does not; numgen slots give every endpoint.
  const slot = (i: number, epAddr: string, epPort: number) => ({ type: 'pick' as const, addr: '172.30.0.1', proto: 'tcp' as const, port: 80, slot: i, epAddr, epPort });
  const table = (extra: Op[] = []): Tracer => {
    const nft = new FakeNft();
    nft.applyOps('ip', [
      ...baseOps('ip', { nodePortAddresses: ['0.0.0.0/0'] }),
      { kind: 'addSet', set: { name: 'endpoints-0', kind: 'pickVipMap' } },
      { kind: 'addChain', chain: { name: 'noop' } }, { kind: 'addChain', chain: { name: 'mark' } }, { kind: 'addChain', chain: { name: 'sel' } }, { kind: 'addChain', chain: { name: 'svc' } },
      { kind: 'addRule', chain: 'noop', stmt: { type: 'srcCidr', cidr: '192.0.2.0/24', then: 'return' } },
      { kind: 'addRule', chain: 'mark', stmt: { type: 'classGoto', from: 'any', masq: true, chain: 'sel' } },
      { kind: 'addRule', chain: 'sel', stmt: { type: 'dnatPick', proto: 'tcp', n: 2, map: 'endpoints-0', key: 'vip' } },
      { kind: 'addRule', chain: 'svc', stmt: { type: 'srcCidr', cidr: '10.0.0.0/8', then: 'return' } },
      // Falls off the end of noop: back in svc, which goes on.
      { kind: 'addRule', chain: 'svc', stmt: { type: 'jump', chain: 'noop' } },
      // mark's goto leaves mark for sel, whose DNAT ends the trace: the drop after it is never reached.
      { kind: 'addRule', chain: 'svc', stmt: { type: 'jump', chain: 'mark' } },
      { kind: 'addRule', chain: 'svc', stmt: { type: 'drop' } },
      { kind: 'addElems', set: 'endpoints-0', elems: [slot(0, '10.180.0.1', 80), slot(1, '10.180.0.2', 81)] },
      { kind: 'addElems', set: 'vips', elems: [{ type: 'vip', addr: '172.30.0.1', proto: 'tcp', port: 80, verdict: { goto: 'svc' } }] },
      ...extra,
    ]);
    return new Tracer(nft, { localAddrs: [NODE_IP] });
  };

  test('jump comes back, goto does not, a random choice yields every endpoint, mark means masquerade', () => {
    const t = table();
    const r = t.trace({ src: OUTSIDE, dst: '172.30.0.1', dport: 80 });
    expect(r).toMatchObject({ verdict: 'DNAT', endpoints: ['10.180.0.1:80', '10.180.0.2:81'], masqueraded: true });
    expect(r.leaves).toHaveLength(2);
    // `return` leaves the service chain: the vmap's goto returns to the base chain, nothing is DNATed.
    expect(t.trace({ src: POD, dst: '172.30.0.1', dport: 80 })).toMatchObject({ verdict: 'ACCEPT', masqueraded: false });
    // Other port, other protocol, established connections: untouched.
    expect(t.trace({ src: OUTSIDE, dst: '172.30.0.1', dport: 81 }).verdict).toBe('ACCEPT');
    expect(t.trace({ src: OUTSIDE, dst: '172.30.0.1', dport: 80, proto: 'udp' }).verdict).toBe('ACCEPT');
    expect(t.trace({ src: OUTSIDE, dst: '172.30.0.1', dport: 80, ctNew: false }).verdict).toBe('ACCEPT');
  });

  test('a slot the rule reads but the map lacks is reported, not silently skipped', () => {
    const t = table([{ kind: 'delElems', set: 'endpoints-0', elems: [slot(1, '10.180.0.2', 81)] }]);
    expect(() => t.trace({ src: OUTSIDE, dst: '172.30.0.1', dport: 80 })).toThrow(TraceError);
    expect(() => t.trace({ src: OUTSIDE, dst: '172.30.0.1', dport: 80 })).toThrow(/slot 1 of 172\.30\.0\.1\|tcp\|80 missing/);
  });

  test('the fake refuses a table whose dnat sits behind a filter hook', () => {
    expect(() => table([{ kind: 'addRule', chain: 'filter-forward', stmt: { type: 'jump', chain: 'svc' } }])).toThrow(NftFakeError);
  });
});

describe('packet flows (upstream runPacketFlowTests cases)', () => {
  const world = (objects: Obj[], o: WorldOptions = {}) => nftWorld([thisNode(), ...objects], { clusterCIDRs: PODS, ...o });
  const twoEps = [ep('10.180.0.1', { node: 'n1' }), ep('10.180.2.1', { node: 'n2' })];

  test('cluster IP: pods keep their source, the node and outside are masqueraded; unserved ports and protocols are rejected', () => {
    const w = world([
      svc('svc1', { ns: 'ns1', clusterIPs: ['172.30.0.41'], ports: p80() }), eps80('svc1', [ep('10.180.0.1', { node: 'n1' })], { ns: 'ns1' }),
      svc('svc2', { ns: 'ns2', clusterIPs: ['172.30.0.42'], ports: [...p80(), { name: 'dns-udp', protocol: 'UDP', port: 53 }, { name: 'dns-tcp', protocol: 'TCP', port: 53 }] }),
      slice('svc2-1', 'svc2', twoEps, { ns: 'ns2', ports: [{ name: 'p80', protocol: 'TCP', port: 80 }, { name: 'dns-udp', protocol: 'UDP', port: 53 }, { name: 'dns-tcp', protocol: 'TCP', port: 5353 }] }),
    ]);
    flows(w, [
      { name: 'simple clusterIP', src: '10.180.0.2', dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80' },
      { name: 'hairpin to cluster IP', src: '10.180.0.1', dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80 masq' },
      { name: 'hairpin to one of two endpoints', src: '10.180.0.1', dst: '172.30.0.42', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80 masq?' },
      { name: 'multiple endpoints', src: POD, dst: '172.30.0.42', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80' },
      { name: 'TCP and UDP on one port (TCP)', src: POD, dst: '172.30.0.42', dport: 53, want: 'DNAT 10.180.0.1:5353,10.180.2.1:5353' },
      { name: 'TCP and UDP on one port (UDP)', src: POD, dst: '172.30.0.42', dport: 53, proto: 'udp', want: 'DNAT 10.180.0.1:53,10.180.2.1:53' },
      { name: 'TCP-only port does not match UDP', src: POD, dst: '172.30.0.42', dport: 80, proto: 'udp', want: 'REJECT' },
      { name: 'svc1 does not accept svc2\'s ports', src: POD, dst: '172.30.0.41', dport: 53, want: 'REJECT' },
      { name: 'unserved port from the node', src: NODE_IP, dst: '172.30.0.41', dport: 443, want: 'REJECT' },
      { name: 'unserved port from outside', src: OUTSIDE, dst: '172.30.0.41', dport: 443, want: 'REJECT' },
      { name: 'node to cluster IP', src: NODE_IP, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80 masq' },
      { name: 'outside to cluster IP', src: OUTSIDE, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80 masq' },
      { name: 'not a service IP', src: POD, dst: '172.30.0.50', dport: 80, want: 'ACCEPT' },
    ]);
  });

  test('--masquerade-all masquerades all cluster-IP traffic; without --cluster-cidr nothing is', () => {
    const objs = [svc('svc1', { clusterIPs: ['172.30.0.41'], ports: p80() }), eps80('svc1', twoEps)];
    flows(world(objs, { masqueradeAll: true }), [
      { name: 'pod', src: POD, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80 masq' },
      { name: 'node', src: NODE_IP, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80 masq' },
      { name: 'outside', src: OUTSIDE, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80 masq' },
    ]);
    flows(world(objs, { clusterCIDRs: [] }), [
      { name: 'pod', src: POD, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80' },
      { name: 'node', src: NODE_IP, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80' },
      { name: 'outside', src: OUTSIDE, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80' },
    ]);
  });

  test('no endpoints: cluster IP, external IP, node port and LB IP reject, from everywhere', () => {
    const w = world([svc('svc1', { type: 'LoadBalancer', clusterIPs: ['172.30.0.41'], externalIPs: [EXT_IP], lbIPs: [LB], ports: p80(3001) })]);
    const cases: FlowCase[] = [];
    for (const [who, src] of [['pod', POD], ['node', NODE_IP], ['outside', OUTSIDE]]) {
      for (const [what, dst, dport] of [['cluster IP', '172.30.0.41', 80], ['external IP', EXT_IP, 80], ['node port', NODE_IP, 3001], ['LB IP', LB, 80]] as const) {
        cases.push({ name: `${who} to ${what}`, src, dst, dport, want: 'REJECT' });
      }
    }
    flows(w, cases);
  });

  test('internalTrafficPolicy Local: this node\'s endpoints only; none here means drop', () => {
    const objs = [svc('svc1', { clusterIPs: ['172.30.0.41'], itp: 'Local', ports: p80() }), eps80('svc1', twoEps)];
    flows(world(objs), [
      { name: 'pod', src: POD, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80' },
      { name: 'node', src: NODE_IP, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80 masq' },
    ]);
    const elsewhere = nftWorld([node('n3', 'zone-a', { addresses: [{ type: 'InternalIP', address: NODE_IP }] }), ...objs], { node: 'n3', clusterCIDRs: PODS });
    flows(elsewhere, [
      { name: 'pod', src: POD, dst: '172.30.0.41', dport: 80, want: 'DROP' },
      { name: 'node', src: NODE_IP, dst: '172.30.0.41', dport: 80, want: 'DROP' },
      { name: 'outside', src: OUTSIDE, dst: '172.30.0.41', dport: 80, want: 'DROP' },
    ]);
  });

  const etpLocal = (endpoints: Obj[]) => [
    svc('svc2', { ns: 'ns2', type: 'LoadBalancer', etp: 'Local', clusterIPs: ['172.30.0.42'], externalIPs: [EXT_IP], lbIPs: [LB], ports: p80(3001), extraSpec: { healthCheckNodePort: 30000 } }),
    eps80('svc2', endpoints, { ns: 'ns2' }),
  ];
  const external = (src: string, want: string, who: string): FlowCase[] => [
    { name: `${who} to LB IP`, src, dst: LB, dport: 80, want },
    { name: `${who} to node port`, src, dst: NODE_IP, dport: 3001, want },
    { name: `${who} to external IP`, src, dst: EXT_IP, dport: 80, want },
  ];

  test('externalTrafficPolicy Local with a local endpoint: outside keeps its source and stays local; pods and the node short-circuit', () => {
    const w = world(etpLocal(twoEps));
    flows(w, [
      ...external(OUTSIDE, 'DNAT 10.180.0.1:80', 'outside'),
      ...external(POD, 'DNAT 10.180.0.1:80,10.180.2.1:80', 'pod'),
      ...external(NODE_IP, 'DNAT 10.180.0.1:80,10.180.2.1:80 masq', 'node'),
      { name: 'pod to cluster IP', src: POD, dst: '172.30.0.42', dport: 80, want: 'DNAT 10.180.0.1:80,10.180.2.1:80' },
    ]);
  });

  test('externalTrafficPolicy Local without a local endpoint: pods and the node still reach the cluster-wide endpoints, outside is dropped', () => {
    const eps = [ep('10.180.2.1', { node: 'n2' }), ep('10.180.3.1', { node: 'n3' })];
    const all = 'DNAT 10.180.2.1:80,10.180.3.1:80';
    const cases = [
      ...external(OUTSIDE, 'DROP', 'outside'),
      ...external(POD, all, 'pod'),
      ...external(NODE_IP, `${all} masq`, 'node'),
    ];
    flows(world(etpLocal(eps)), cases);
    // --masquerade-all changes only cluster-IP traffic: short-circuited pod traffic keeps its source.
    flows(world(etpLocal(eps), { masqueradeAll: true }), [...cases, { name: 'pod to cluster IP', src: POD, dst: '172.30.0.42', dport: 80, want: `${all} masq` }]);
  });

  test('externalTrafficPolicy Local without --cluster-cidr: pods cannot be told apart and are dropped like outside clients', () => {
    const eps = [ep('10.180.2.1', { node: 'n2' })];
    flows(world(etpLocal(eps), { clusterCIDRs: [] }), [
      ...external(OUTSIDE, 'DROP', 'outside'),
      ...external(POD, 'DROP', 'pod'),
      ...external(NODE_IP, 'DNAT 10.180.2.1:80 masq', 'node'),
    ]);
  });

  test('both policies Local on a node without a local endpoint: cluster IP dropped, external destinations short-circuited for pods and the node', () => {
    const eps = [ep('10.180.2.1', { node: 'n2' })];
    const objs = [
      svc('svc1', { type: 'LoadBalancer', itp: 'Local', etp: 'Local', clusterIPs: ['172.30.0.41'], lbIPs: [LB], ports: p80(3001) }),
      eps80('svc1', eps),
    ];
    flows(world(objs), [
      { name: 'pod to cluster IP', src: POD, dst: '172.30.0.41', dport: 80, want: 'DROP' },
      { name: 'node to cluster IP', src: NODE_IP, dst: '172.30.0.41', dport: 80, want: 'DROP' },
      { name: 'pod to LB IP', src: POD, dst: LB, dport: 80, want: 'DNAT 10.180.2.1:80' },
      { name: 'node to node port', src: NODE_IP, dst: NODE_IP, dport: 3001, want: 'DNAT 10.180.2.1:80 masq' },
      { name: 'outside to LB IP', src: OUTSIDE, dst: LB, dport: 80, want: 'DROP' },
      { name: 'outside to node port', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: 'DROP' },
    ]);
  });

  test('internalTrafficPolicy Local with externalTrafficPolicy Cluster: external destinations still use every endpoint', () => {
    const objs = [svc('svc1', { type: 'NodePort', itp: 'Local', clusterIPs: ['172.30.0.41'], ports: p80(3001) }), eps80('svc1', [ep('10.180.2.1', { node: 'n2' })])];
    flows(world(objs), [
      { name: 'pod to cluster IP', src: POD, dst: '172.30.0.41', dport: 80, want: 'DROP' },
      { name: 'pod to node port', src: POD, dst: NODE_IP, dport: 3001, want: 'DNAT 10.180.2.1:80 masq' },
      { name: 'outside to node port', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: 'DNAT 10.180.2.1:80 masq' },
    ]);
  });

  test('terminating endpoints that still serve take traffic only when none is ready', () => {
    const term = (ip: string) => ep(ip, { node: 'n2', ready: false, serving: true, terminating: true });
    flows(world([svc('svc1', { clusterIPs: ['172.30.0.41'], ports: p80() }), eps80('svc1', [term('10.180.2.1'), ep('10.180.2.2', { node: 'n2', ready: false, serving: false, terminating: true })])]), [
      { name: 'fallback', src: POD, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.2.1:80' },
    ]);
    flows(world([svc('svc1', { clusterIPs: ['172.30.0.41'], ports: p80() }), eps80('svc1', [term('10.180.2.1'), ep('10.180.2.3', { node: 'n3' })])]), [
      { name: 'ready wins', src: POD, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.2.3:80' },
    ]);
  });

  test('externalTrafficPolicy Cluster: every client is masqueraded to external destinations', () => {
    const w = world([
      svc('svc3', { type: 'LoadBalancer', clusterIPs: ['172.30.0.43'], externalIPs: [EXT_IP], lbIPs: [LB], ports: p80(3001) }), eps80('svc3', twoEps),
    ]);
    const all = 'DNAT 10.180.0.1:80,10.180.2.1:80 masq';
    flows(w, [...external(OUTSIDE, all, 'outside'), ...external(POD, all, 'pod'), ...external(NODE_IP, all, 'node')]);
  });

  test('load-balancer source ranges: allowed, refused, node ports bypass them, and the node-IP exception', () => {
    const lbSvc = (ranges: string[]) => [
      svc('svc1', { type: 'LoadBalancer', clusterIPs: ['172.30.0.41'], lbIPs: [LB, '5.6.7.8'], sourceRanges: ranges, ports: p80(3001) }),
      eps80('svc1', [ep('10.180.0.1', { node: 'n2' })]),
    ];
    const ok = 'DNAT 10.180.0.1:80 masq';
    flows(world(lbSvc(['192.168.0.0/24', ' 203.0.113.0/25'])), [
      { name: 'pod to cluster IP', src: POD, dst: '172.30.0.41', dport: 80, want: 'DNAT 10.180.0.1:80' },
      { name: 'external to node port', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: ok },
      { name: 'node port bypasses source ranges', src: OUTSIDE_BLOCKED, dst: NODE_IP, dport: 3001, want: ok },
      { name: 'accepted external to LB1', src: OUTSIDE, dst: LB, dport: 80, want: ok },
      { name: 'accepted external to LB2', src: OUTSIDE, dst: '5.6.7.8', dport: 80, want: ok },
      { name: 'blocked external to LB1', src: OUTSIDE_BLOCKED, dst: LB, dport: 80, want: 'DROP' },
      { name: 'blocked external to LB2', src: OUTSIDE_BLOCKED, dst: '5.6.7.8', dport: 80, want: 'DROP' },
      { name: 'pod to LB1 (not in the ranges)', src: POD, dst: LB, dport: 80, want: 'DROP' },
      { name: 'node to LB1 (in the ranges)', src: NODE_IP, dst: LB, dport: 80, want: ok },
      { name: 'same node to LB1, SNATed to LB1 (implicitly allowed)', src: LB, dst: LB, dport: 80, want: ok },
    ]);
    // Without a range holding the node IP, the LB IPs are not allowed sources.
    flows(world(lbSvc(['203.0.113.0/25'])), [
      { name: 'LB IP as source', src: LB, dst: LB, dport: 80, want: 'DROP' },
      { name: 'node to LB1', src: NODE_IP, dst: LB, dport: 80, want: 'DROP' },
      { name: 'accepted external', src: OUTSIDE, dst: LB, dport: 80, want: ok },
    ]);
  });

  describe('node ports answer only on --nodeport-addresses', () => {
    const objs = [svc('svc1', { type: 'NodePort', clusterIPs: ['172.30.0.41'], ports: p80(3001) }), eps80('svc1', [ep('10.180.0.1', { node: 'n2' })])];
    const ok = 'DNAT 10.180.0.1:80 masq';
    test('default: the node\'s primary address (first InternalIP) only', () => {
      flows(world(objs), [
        { name: 'primary', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: ok },
        { name: 'other local address', src: OUTSIDE, dst: NODE_IP_ALT, dport: 3001, want: 'ACCEPT' },
        { name: 'node to its primary', src: NODE_IP, dst: NODE_IP, dport: 3001, want: ok },
        { name: 'node to localhost', src: '127.0.0.1', dst: '127.0.0.1', dport: 3001, want: 'ACCEPT' },
        { name: 'not a local address', src: OUTSIDE, dst: '192.168.0.3', dport: 3001, want: 'ACCEPT' },
      ]);
    });
    test('CIDR form: local addresses inside the CIDRs', () => {
      flows(world(objs, { nodePortAddresses: ['192.168.1.0/24'] }), [
        { name: 'inside', src: OUTSIDE, dst: NODE_IP_ALT, dport: 3001, want: ok },
        { name: 'outside the CIDR', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: 'ACCEPT' },
      ]);
    });
    test('0.0.0.0/0: every local address but loopback', () => {
      flows(world(objs, { nodePortAddresses: ['0.0.0.0/0'] }), [
        { name: 'primary', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: ok },
        { name: 'other', src: OUTSIDE, dst: NODE_IP_ALT, dport: 3001, want: ok },
        { name: 'localhost', src: '127.0.0.1', dst: '127.0.0.1', dport: 3001, want: 'ACCEPT' },
      ]);
    });
    test('no endpoints: rejected only where node ports answer', () => {
      const w = world([svc('svc1', { type: 'NodePort', clusterIPs: ['172.30.0.41'], ports: p80(3001) })]);
      flows(w, [
        { name: 'primary', src: OUTSIDE, dst: NODE_IP, dport: 3001, want: 'REJECT' },
        { name: 'other local address', src: OUTSIDE, dst: NODE_IP_ALT, dport: 3001, want: 'ACCEPT' },
      ]);
    });
  });

  test('session affinity: a client sticks to the endpoint it got until the timeout', () => {
    const w = world([svc('svc1', { clusterIPs: ['172.30.0.41'], affinity: 100, ports: p80() }), eps80('svc1', twoEps)]);
    const pkt = { src: POD, dst: '172.30.0.41', dport: 80 };
    expect(w.trace(pkt).endpoints).toEqual(['10.180.0.1:80', '10.180.2.1:80']);
    w.trace(pkt, '10.180.2.1:80');
    expect(w.trace(pkt).endpoints).toEqual(['10.180.2.1:80']);
    expect(w.trace({ ...pkt, src: '10.0.0.3' }).endpoints).toEqual(['10.180.0.1:80', '10.180.2.1:80']);
    w.nft.now += 99;
    expect(w.trace(pkt).endpoints).toEqual(['10.180.2.1:80']);
    w.nft.now += 2;
    expect(w.trace(pkt).endpoints).toEqual(['10.180.0.1:80', '10.180.2.1:80']);
  });

  test('dual stack: each family has its own endpoints; a family without any rejects', () => {
    const w = nftWorld([
      node('n1', 'zone-a', { addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'InternalIP', address: '2001:db8::1' }] }),
      svc('svc1', { clusterIPs: ['172.30.0.41', 'fd00:10:96::41'], extraSpec: { ipFamilies: ['IPv4', 'IPv6'] }, ports: p80() }),
      slice('svc1-v6', 'svc1', [ep('fd00:10::1:1', { node: 'n2' })], { family: 'IPv6', ports: [{ name: 'p80', protocol: 'TCP', port: 80 }] }),
    ], { clusterCIDRs: ['10.0.0.0/8', 'fd00:10::/64'] });
    flows(w, [
      { name: 'v4 pod', src: POD, dst: '172.30.0.41', dport: 80, want: 'REJECT' },
      { name: 'v6 pod', src: 'fd00:10::2', dst: 'fd00:10:96::41', dport: 80, want: 'DNAT [fd00:10::1:1]:80' },
      { name: 'v6 node', src: '2001:db8::1', dst: 'fd00:10:96::41', dport: 80, want: 'DNAT [fd00:10::1:1]:80 masq' },
      { name: 'v6 outside', src: '2001:db8:ffff::9', dst: 'fd00:10:96::41', dport: 80, want: 'DNAT [fd00:10::1:1]:80 masq' },
    ]);
  });

  test('established connections are left to conntrack', () => {
    const w = world([svc('svc1', { clusterIPs: ['172.30.0.41'], ports: p80() })]);
    expect(w.trace({ src: POD, dst: '172.30.0.41', dport: 80, ctNew: false }).verdict).toBe('ACCEPT');
    expect(w.trace({ src: POD, dst: '172.30.0.41', dport: 80 }).verdict).toBe('REJECT');
  });
});

// The helpers that check the tracer's tables against the kernel's (test/e2e/nft-tracer-vs-kernel.test.ts),
// without root: the comparator sees one missing rule or element, and the reader of the kernel's rules
// refuses expressions that do not mean what the tracer evaluates.
import { stmtExprs } from '../src/backend/nft/netlink';
import type { IpFamily, Stmt } from '../src/backend/nft/types';
import { NFT_REG_1, NFT_REG32, type NftExpr } from '../src/native/nft-types';
import { ep, node, slice, svc } from './helpers/k8s';
import { canonStmt, diffTables, stmtLine } from './helpers/nft-compare';
import { LiftError, liftRule, type SetInfo } from './helpers/nft-lift';
import type { FakeTable } from '../src/backend/nft/fake';
import { nftWorld } from './helpers/nft-world';

const world = () => nftWorld([
  node('n1', 'zone-a', { addresses: [{ type: 'InternalIP', address: '192.168.0.2' }] }),
  svc('lb', { type: 'LoadBalancer', clusterIPs: ['172.30.0.41'], lbIPs: ['1.2.3.4'], sourceRanges: ['203.0.113.0/25'], ports: [{ name: 'p80', protocol: 'TCP', port: 80, nodePort: 3001 }] }),
  slice('lb-1', 'lb', [ep('10.180.0.1', { node: 'n1' }), ep('10.180.2.1', { node: 'n2' })], { ports: [{ name: 'p80', protocol: 'TCP', port: 80 }] }),
  svc('aff', { clusterIPs: ['172.30.0.42'], affinity: 100, ports: [{ name: 'p80', protocol: 'TCP', port: 80 }] }),
  slice('aff-1', 'aff', [ep('10.180.0.2', { node: 'n1' })], { ports: [{ name: 'p80', protocol: 'TCP', port: 80 }] }),
], { clusterCIDRs: ['10.0.0.0/8'] });

describe('diffTables', () => {
  const planned = (): FakeTable => world().nft.tables.ip;
  const edited = (edit: (t: FakeTable) => void): string[] => {
    const a = planned(), b = a.clone();
    edit(b);
    return diffTables(a, b);
  };

  test('the same table: nothing', () => {
    expect(diffTables(planned(), planned())).toEqual([]);
    expect(diffTables(planned(), planned().clone())).toEqual([]);
  });

  test('one rule missing, one rule more, two rules swapped', () => {
    const post = (t: FakeTable) => t.chains.get('nat-postrouting')!;
    const missing = edited((t) => { post(t).rules.splice(3, 1); });
    expect(missing).toEqual(['- chain nat-postrouting rule 3: masquerade {}']);
    const more = edited((t) => { post(t).rules.push({ type: 'drop' }); });
    expect(more).toEqual(['+ chain nat-postrouting rule 4: drop {}']);
    const swapped = edited((t) => { const r = post(t).rules; [r[1], r[2]] = [r[2], r[1]]; });
    expect(swapped).toHaveLength(4);
    expect(swapped).toContain('- chain nat-postrouting rule 1: returnIfNoMark {}');
    expect(swapped).toContain('+ chain nat-postrouting rule 2: returnIfNoMark {}');
  });

  test('one element missing, or with other data', () => {
    const vip = (t: FakeTable) => [...t.sets.get('vips')!.elems].find(([, e]) => e.type === 'vip' && e.addr === '1.2.3.4')!;
    const [key, e] = vip(planned());
    if (e.type !== 'vip' || e.verdict === 'drop') throw new Error('the LB IP goes to a chain');
    expect(edited((t) => { t.sets.get('vips')!.elems.delete(key); })).toEqual([`- set vips element 1.2.3.4 . tcp . 80 : goto ${e.verdict.goto}`]);
    expect(edited((t) => { t.sets.get('vips')!.elems.set(key, { ...e, verdict: 'drop' }); })).toEqual([
      '+ set vips element 1.2.3.4 . tcp . 80 : drop',
      `- set vips element 1.2.3.4 . tcp . 80 : goto ${e.verdict.goto}`,
    ]);
  });

  test('a set\'s kind, timeout or capacity, a chain\'s hook, a chain or set missing', () => {
    const aff = [...planned().sets.keys()].find((n) => n.startsWith('aff-'))!;
    expect(edited((t) => { const s = t.sets.get(aff)!; s.spec = { ...s.spec, timeoutSec: 101 }; })).toEqual([`- set ${aff}: affinity timeout 100s`, `+ set ${aff}: affinity timeout 101s`]);
    expect(edited((t) => { const s = t.sets.get('cluster-ips')!; s.spec = { ...s.spec, kind: 'affinity' }; })).toHaveLength(2);
    expect(edited((t) => { const c = t.chains.get('filter-input')!; c.spec = { ...c.spec, hook: { ...c.spec.hook!, priority: 0 } }; })).toEqual([
      '- chain filter-input: filter input priority -110', '+ chain filter-input: filter input priority 0',
    ]);
    expect(edited((t) => { t.chains.delete('reject-chain'); })).toEqual([
      '- chain reject-chain', '- chain reject-chain rule 0: rejectTcp {}', '- chain reject-chain rule 1: rejectIcmp {}',
    ]);
    expect(edited((t) => { t.sets.delete('hairpin'); })).toEqual(expect.arrayContaining(['- set hairpin: pairSet size 1024']));
    expect(edited((t) => { const s = t.sets.get('hairpin')!; s.spec = { ...s.spec, size: 2048 }; })).toEqual(['- set hairpin: pairSet size 1024', '+ set hairpin: pairSet size 2048']);
  });

  test('one form per meaning: address text, host bits, a goto by source range is a class rule', () => {
    expect(stmtLine({ type: 'dnat', proto: 'tcp', addr: 'fd00:0:0::1', port: 80 })).toBe(stmtLine({ type: 'dnat', proto: 'tcp', addr: 'fd00::1', port: 80 }));
    expect(stmtLine({ type: 'srcCidr', cidr: '10.1.2.3/8', then: 'return' })).toBe(stmtLine({ type: 'srcCidr', cidr: '10.0.0.0/8', then: 'return' }));
    expect(canonStmt({ type: 'srcCidr', cidr: '10.0.0.0/8', then: { goto: 'c' } })).toEqual({ type: 'classGoto', from: { cidr: '10.0.0.0/8' }, masq: false, chain: 'c' });
    expect(canonStmt({ type: 'classGoto', from: 'any', masq: false, chain: 'c' })).toEqual({ type: 'goto', chain: 'c' });
    // A local node-port rule on a /0 tests loopback only with exceptLoopback.
    expect(stmtLine({ type: 'vmapPort', map: 'm', local: true, daddrCidr: '0.0.0.0/0', exceptLoopback: true })).toBe(stmtLine({ type: 'vmapPort', map: 'm', local: true }));
    expect(stmtLine({ type: 'vmapPort', map: 'm', local: true, daddrCidr: '0.0.0.0/0' })).not.toBe(stmtLine({ type: 'vmapPort', map: 'm', local: true }));
    // Still distinct: masquerade or not, another CIDR.
    expect(stmtLine({ type: 'classGoto', from: 'any', masq: true, chain: 'c' })).not.toBe(stmtLine({ type: 'goto', chain: 'c' }));
    expect(stmtLine({ type: 'srcCidr', cidr: '10.0.0.0/9', then: 'return' })).not.toBe(stmtLine({ type: 'srcCidr', cidr: '10.0.0.0/8', then: 'return' }));
  });
});

describe('liftRule', () => {
  const sets = (fam: IpFamily): Map<string, SetInfo> => {
    const al = fam === 'ip' ? 4 : 16;
    return new Map<string, SetInfo>([
      ['vips', { name: 'vips', keyLen: al + 8, map: 'verdict' }],
      ['ports', { name: 'ports', keyLen: 8, map: 'verdict' }],
      ['addrs', { name: 'addrs', keyLen: al, map: null }],
      ['hairpin', { name: 'hairpin', keyLen: 2 * al, map: null }],
      ['pv', { name: 'pv', keyLen: al + 12, map: 'data', dataLen: al + 4 }],
      ['pp', { name: 'pp', keyLen: 12, map: 'data', dataLen: al + 4 }],
    ]);
  };
  // Every statement kind (and the variants of the class and node-port rules) in both families.
  const stmts = (fam: IpFamily): Stmt[] => {
    const v4 = fam === 'ip';
    const cidr = v4 ? '10.0.0.0/8' : 'fd00:10::/64';
    return [
      { type: 'vmapVip', map: 'vips' }, { type: 'vmapVip', map: 'vips', ctNew: true },
      { type: 'vmapPort', map: 'ports' }, { type: 'vmapPort', map: 'ports', ctNew: true, local: true },
      { type: 'vmapPort', map: 'ports', local: true, daddrCidr: cidr }, { type: 'vmapPort', map: 'ports', local: true, daddrCidr: cidr, exceptLoopback: true },
      { type: 'vmapPort', map: 'ports', local: true, daddrCidr: v4 ? '0.0.0.0/0' : '::/0' },
      { type: 'jump', chain: 'c' }, { type: 'goto', chain: 'c' },
      { type: 'srcCidr', cidr, then: 'return' }, { type: 'srcCidr', cidr, then: { goto: 'c' } },
      { type: 'classGoto', from: 'local', masq: true, chain: 'c' }, { type: 'classGoto', from: 'any', masq: true, chain: 'c' },
      { type: 'classGoto', from: { cidr }, masq: true, chain: 'c' }, { type: 'classGoto', from: { iifname: 'cni0', prefix: false }, masq: false, chain: 'c' },
      { type: 'classGoto', from: { iifname: 'veth', prefix: true }, masq: false, chain: 'c' },
      { type: 'iifReturn', iifname: 'cni0', prefix: false }, { type: 'iifReturn', iifname: 'veth', prefix: true },
      { type: 'rejectDaddrInSet', set: 'addrs' },
      { type: 'dnatPick', proto: 'tcp', n: 2, map: 'pv', key: 'vip' }, { type: 'dnatPick', proto: 'sctp', n: 5, map: 'pp', key: 'port' },
      { type: 'dnat', proto: 'tcp', addr: v4 ? '10.1.2.3' : 'fd00::3', port: 8080 },
      { type: 'affinityGoto', set: 'addrs', chain: 'c' }, { type: 'randomGoto', mod: 3, chain: 'c' }, { type: 'affinityUpdate', set: 'addrs' },
      { type: 'drop' }, { type: 'rejectTcp' }, { type: 'rejectIcmp' }, { type: 'hairpinMasq' }, { type: 'returnIfNoMark' }, { type: 'clearMark' }, { type: 'masquerade' },
    ];
  };

  test.each(['ip', 'ip6'] as const)('every statement the renderer writes (%s) reads back as itself', (fam) => {
    for (const st of stmts(fam)) expect(stmtLine(liftRule(fam, stmtExprs(fam, st), sets(fam)))).toBe(stmtLine(st));
  });

  test('expressions that mean something else are refused, not guessed', () => {
    const s = sets('ip');
    const lift = (exprs: NftExpr[]) => () => liftRule('ip', exprs, s);
    const vmap = stmtExprs('ip', { type: 'vmapVip', map: 'vips', ctNew: true });
    // The source port instead of the destination port.
    expect(lift(vmap.map((x) => (x.type === 'payload' && x.base === 'transport' ? { ...x, offset: 0 } : x)))).toThrow(LiftError);
    // ct state established instead of new.
    expect(lift(vmap.map((x) => (x.type === 'bitwise' ? { ...x, mask: Uint8Array.of(2, 0, 0, 0) } : x)))).toThrow(/no condition/);
    // The port loaded over the protocol: the key's last field is missing.
    expect(lift(vmap.map((x) => (x.type === 'payload' && x.base === 'transport' ? { ...x, dreg: NFT_REG32(1) } : x)))).toThrow(/no whole value/);
    // The protocol and the port swapped in the key: another statement (a vmap keyed daddr . dport . l4proto).
    expect(lift(vmap.map((x) => (x.type === 'payload' && x.base === 'transport' ? { ...x, dreg: NFT_REG32(1) } : x.type === 'meta' ? { ...x, dreg: NFT_REG32(2) } : x)))).toThrow(/vmap key daddr . dport . l4proto/);
    // A test after a statement; a verdict kpng never writes; masquerade with random ports.
    expect(lift([...stmtExprs('ip', { type: 'affinityUpdate', set: 'addrs' }), ...stmtExprs('ip', { type: 'srcCidr', cidr: '10.0.0.0/8', then: 'return' })])).toThrow(/after a statement/);
    expect(lift([{ type: 'verdict', verdict: 'accept' }])).toThrow(/verdict accept/);
    expect(lift([{ type: 'masq', flags: { random: true } }])).toThrow(LiftError);
    // Slots of a pick map read from another offset than 0.
    expect(lift(stmtExprs('ip', { type: 'dnatPick', proto: 'tcp', n: 2, map: 'pv', key: 'vip' }).map((x) => (x.type === 'numgen' ? { ...x, offset: 1 } : x)))).toThrow(/offset 1/);
    // A mask that is no prefix.
    expect(lift([{ type: 'payload', base: 'network', offset: 12, len: 4, dreg: NFT_REG_1 }, { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: Uint8Array.of(255, 0, 255, 0), xor: new Uint8Array(4) }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: Uint8Array.of(10, 0, 0, 0) }, { type: 'verdict', verdict: 'return' }])).toThrow(/not a prefix/);
  });
});

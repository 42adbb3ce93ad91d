// The bytes the three compilers of nftables expressions (the nft backend's encoder, the IPVS companion,
// the aggregator's typed rules) hand to the addon, for every statement / action / match they know,
// against digests recorded before they were moved onto the expression builders (src/native/nft-expr.ts):
// a builder that changed one attribute changes a digest. KPNG_UPDATE_GOLDEN=1 rewrites the file
// (never in CI or a strict run), to be reviewed like any golden file.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { NftBatch } from '../src/native/encode';
import type { NftExpr, NftSet } from '../src/native/nft-types';
import { stmtExprs } from '../src/backend/nft/netlink';
import type { Stmt } from '../src/backend/nft/types';
import { CompanionTable, classChain } from '../src/backend/ipvs/companion';
import type { Action, ClassActions, IpFamily } from '../src/backend/ipvs/plan';
import { compileRule, type RuleSpec } from '../src/aggregator/rules';
import type { PodSource } from '../src/model/enls';
import { goldenMode } from './helpers/scenario';

const GOLDEN = path.join(__dirname, 'fixtures', 'nft-expr-bytes.json');

/** The addon's bytes of one rule of these expressions. */
function ruleBytes(family: 'ip' | 'ip6' | 'inet' | 'bridge' | 'netdev', exprs: NftExpr[]): string {
  const b = new NftBatch(1024);
  b.add({ op: 'add', rule: { family, table: 't', chain: 'c', exprs } });
  return digest(b.finish());
}
const digest = (b: Uint8Array): string => crypto.createHash('sha256').update(b).digest('hex').slice(0, 24);

const FAMS: IpFamily[] = ['ip', 'ip6'];

function nftBackendCases(): Record<string, string> {
  const out: Record<string, string> = {};
  const pods = (f: IpFamily): PodSource[] => [{ cidr: f === 'ip' ? '10.1.0.0/16' : 'fd00:1::/64' }, { iifname: 'cni0', prefix: false }, { iifname: 'veth', prefix: true }];
  for (const f of FAMS) {
    const cidr = f === 'ip' ? '10.96.0.0/12' : 'fd00:96::/108';
    const stmts: Stmt[] = [
      { type: 'vmapVip', map: 'vips' }, { type: 'vmapVip', map: 'vips', ctNew: true },
      { type: 'vmapPort', map: 'ports' }, { type: 'vmapPort', map: 'ports', ctNew: true, local: true },
      { type: 'vmapPort', map: 'ports', local: true, daddrCidr: cidr }, { type: 'vmapPort', map: 'ports', local: true, daddrCidr: cidr, exceptLoopback: true },
      { type: 'vmapPort', map: 'ports', daddrCidr: f === 'ip' ? '0.0.0.0/0' : '::/0' },
      { type: 'jump', chain: 'svc-a' }, { type: 'goto', chain: 'svc-b' },
      { type: 'srcCidr', cidr, then: 'return' }, { type: 'srcCidr', cidr: f === 'ip' ? '192.0.2.7/32' : '2001:db8::7/128', then: { goto: 'fw' } },
      { type: 'iifReturn', iifname: 'cni0', prefix: false }, { type: 'iifReturn', iifname: 'veth', prefix: true },
      ...[...pods(f), 'local' as const, 'any' as const].flatMap((from) => [true, false].map((masq): Stmt => ({ type: 'classGoto', from, masq, chain: 'ep' }))),
      { type: 'rejectDaddrInSet', set: 'service-ips' },
      { type: 'dnatPick', proto: 'tcp', n: 3, map: 'pick', key: 'vip' }, { type: 'dnatPick', proto: 'udp', n: 1, map: 'pick', key: 'port' },
      { type: 'dnat', proto: 'sctp', addr: f === 'ip' ? '10.0.0.9' : 'fd00::9', port: 8080 },
      { type: 'affinityGoto', set: 'aff', chain: 'ep' }, { type: 'randomGoto', mod: 4, chain: 'ep' }, { type: 'affinityUpdate', set: 'aff' },
      { type: 'drop' }, { type: 'rejectTcp' }, { type: 'rejectIcmp' }, { type: 'hairpinMasq' },
      ...(f === 'ip' ? [{ type: 'localnetMasq' }, { type: 'dropLocalnet' }] as Stmt[] : []),
      { type: 'returnIfNoMark' }, { type: 'clearMark' }, { type: 'masquerade' },
      { type: 'flowOffload', flowtable: 'fast', minPackets: 0 }, { type: 'flowOffload', flowtable: 'fast', minPackets: 20 },
    ];
    stmts.forEach((st, i) => { out[`nft ${f} #${i} ${st.type}`] = ruleBytes(f, stmtExprs(f, st)); });
  }
  return out;
}

function companionCases(): Record<string, string> {
  const out: Record<string, string> = {};
  const kinds: Action[] = [
    { kind: 'pass', masq: false }, { kind: 'pass', masq: true }, { kind: 'pass', masq: false, fwmark: 7 },
    { kind: 'pass', masq: true, fwmark: 9 }, { kind: 'drop', masq: false }, { kind: 'reject', masq: false },
  ];
  for (const f of FAMS) {
    const pods: PodSource[] = [{ cidr: f === 'ip' ? '10.1.0.0/16' : 'fd00:1::/64' }, { cidr: f === 'ip' ? '0.0.0.0/0' : '::/0' }, { iifname: 'cni0', prefix: false }, { iifname: 'veth', prefix: true }];
    kinds.forEach((pod, i) => kinds.forEach((node, j) => {
      const actions: ClassActions = { pod, node, other: kinds[(i + j) % kinds.length] };
      const { name, rules } = classChain(f, actions, pods);
      out[`companion ${f} ${name} ${i}.${j}`] = digest(Buffer.concat(rules.map((r) => Buffer.from(ruleBytes(f, r)))));
    }));
    const table = new CompanionTable(f, 'kpng-ipvs', pods);
    const addr = f === 'ip' ? '10.96.0.1' : 'fd00:96::1';
    table.setDest('a', { fam: f, addr, proto: 'tcp', port: 80, actions: { pod: kinds[1], node: kinds[2], other: kinds[5] }, allowed: [f === 'ip' ? '192.0.2.0/24' : '2001:db8::/32'], bind: true });
    table.setDest('b', { fam: f, addr, proto: 'udp', port: 53, actions: { pod: kinds[0], node: kinds[0], other: kinds[0] }, allowed: null, bind: true });
    table.refAddr(addr, 1);
    table.refHairpin(f === 'ip' ? '10.1.0.5' : 'fd00:1::5', 1);
    const b = new NftBatch(1 << 16);
    for (const op of table.fullOps(pods)) b.add(op);
    out[`companion ${f} fullOps`] = digest(b.finish());
  }
  return out;
}

function aggregatorCases(): Record<string, string> {
  const out: Record<string, string> = {};
  const sets = (v: 4 | 6) => new Map<string, Pick<NftSet, 'name' | 'keyType' | 'dataType'>>([
    ['addrs', { name: 'addrs', keyType: v === 4 ? 'ipv4_addr' : 'ipv6_addr' }],
    ['ports', { name: 'ports', keyType: 'inet_service' }],
    ['protos', { name: 'protos', keyType: 'inet_proto' }],
    ['ifs', { name: 'ifs', keyType: 'ifname' }],
    ['marks', { name: 'marks', keyType: 'mark' }],
    ['allowed', { name: 'allowed', keyType: [v === 4 ? 'ipv4_addr' : 'ipv6_addr', 'inet_proto', 'inet_service'] }],
    ['verdicts', { name: 'verdicts', keyType: ['inet_proto', 'inet_service'], dataType: 'verdict' }],
    ['pairs', { name: 'pairs', keyType: ['ifname', v === 4 ? 'ipv4_addr' : 'ipv6_addr'] }],
  ]);
  const specs = (v: 4 | 6): RuleSpec[] => {
    const a = v === 4 ? '192.0.2.1' : '2001:db8::1';
    const net = v === 4 ? ['192.0.2.0/24', '10.0.0.0/9', '!172.16.0.0/12', '192.0.2.128/25'] : ['2001:db8::/32', '2001:db8::/33', '!fd00::/8', '2001:db8:0:1::/64'];
    return [
      { match: { saddr: a }, verdict: 'accept' }, { match: { daddr: `!${a}` }, verdict: 'drop' },
      ...net.map((n): RuleSpec => ({ match: { saddr: n, daddr: a }, counter: true, verdict: 'accept' })),
      { match: { saddr: '@addrs' }, verdict: 'drop' }, { match: { daddr: '!@addrs' }, verdict: 'drop' },
      { match: { protocol: 'tcp', dport: 22 }, verdict: 'accept' }, { match: { protocol: '!udp', sport: '!53' }, verdict: 'drop' },
      { match: { protocol: 132, dport: '1000-2000' }, verdict: 'accept' }, { match: { protocol: 'tcp', dport: '!1000-2000' }, verdict: 'drop' },
      { match: { protocol: '@protos', dport: '@ports' }, verdict: 'accept' }, { match: { sport: '!@ports' }, verdict: 'drop' },
      { match: { iifname: 'eth0' }, verdict: 'accept' }, { match: { oifname: '!veth*' }, verdict: 'drop' }, { match: { iifname: '@ifs' }, verdict: 'accept' },
      { match: { mark: '0x10' }, verdict: 'accept' }, { match: { mark: '!0x10/0xff' }, verdict: 'drop' }, { match: { mark: '@marks' }, verdict: 'accept' },
      { match: { ctState: ['established', 'related'] }, verdict: 'accept' }, { match: { ctState: ['new'] }, counter: true, log: true, verdict: 'drop' },
      { match: { lookup: { keys: ['saddr', 'protocol', 'dport'], set: 'allowed' } }, verdict: 'accept' },
      { match: { lookup: { keys: ['iifname', 'daddr'], set: 'pairs', negate: true } }, verdict: 'drop' },
      { log: { prefix: 'p: ', level: 'warn' } }, { log: { group: 3 }, verdict: 'continue' }, { counter: true, verdict: 'return' },
      { verdict: { jump: 'other' } }, { verdict: { goto: 'other' } }, { verdict: { vmap: { keys: ['protocol', 'dport'], map: 'verdicts' } } },
      { match: { protocol: 'tcp' }, verdict: 'reject' }, { match: { protocol: 'tcp' }, verdict: { reject: 'tcp-reset' } },
      { match: { saddr: a }, verdict: { reject: 'host-unreachable' } }, { verdict: { reject: 'admin-prohibited' } }, { verdict: { reject: 'net-unreachable' } },
    ];
  };
  for (const family of ['ip', 'ip6', 'inet', 'bridge', 'netdev'] as const) {
    for (const v of [4, 6] as const) {
      if ((family === 'ip' && v === 6) || (family === 'ip6' && v === 4)) continue;
      specs(v).forEach((spec, i) => {
        out[`aggregator ${family} v${v} #${i}`] = ruleBytes(family, compileRule(spec, { family, sets: sets(v) }));
      });
    }
  }
  return out;
}

test('the three compilers send the kernel the bytes they sent before the expression builders', () => {
  const now = { ...nftBackendCases(), ...companionCases(), ...aggregatorCases() };
  if (goldenMode() === 'update' || !fs.existsSync(GOLDEN)) {
    if (!fs.existsSync(GOLDEN) && goldenMode() !== 'update') throw new Error(`${GOLDEN} is missing: KPNG_UPDATE_GOLDEN=1 records it`);
    fs.writeFileSync(GOLDEN, JSON.stringify(now, null, 1) + '\n');
    return;
  }
  expect(now).toEqual(JSON.parse(fs.readFileSync(GOLDEN, 'utf8')));
});

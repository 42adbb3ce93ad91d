// Typed rules compile to the kernel's expressions, and bad ones are refused with the path of the
// problem. (That nft lists every compiled form as intended: test/e2e/aggregator-rules.test.ts.)
import { NFT_REG_1, NFT_REG32, ipv4, port, u32host, type NftSet } from '../native/nft-types';
import { compileRule, type RuleContext, type RuleSpec } from './rules';
import { intervalElements, parseRange } from './intervals';

const sets = (...s: Pick<NftSet, 'name' | 'keyType' | 'dataType'>[]) => new Map(s.map((x) => [x.name, x]));
const ip: RuleContext = { family: 'ip', sets: sets({ name: 'deny', keyType: 'ipv4_addr' }, { name: 'svc', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: 'verdict' }) };
const inet: RuleContext = { family: 'inet', sets: sets({ name: 'deny6', keyType: 'ipv6_addr' }) };

describe('compileRule', () => {
  test('an address, protocol and port match with a counter and a verdict', () => {
    expect(compileRule({ match: { saddr: '10.1.2.3', protocol: 'tcp', dport: 22 }, counter: true, verdict: 'drop' }, ip)).toEqual([
      { type: 'payload', base: 'network', offset: 12, len: 4, dreg: NFT_REG_1 },
      { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: ipv4('10.1.2.3') },
      { type: 'meta', key: 'l4proto', dreg: NFT_REG_1 },
      { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: new Uint8Array([6]) },
      { type: 'payload', base: 'transport', offset: 2, len: 2, dreg: NFT_REG_1 },
      { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: port(22) },
      { type: 'counter' },
      { type: 'verdict', verdict: 'drop' },
    ]);
  });

  test('a byte-aligned prefix loads only its bytes; another uses a mask', () => {
    expect(compileRule({ match: { daddr: '10.2.0.0/16' } }, ip).slice(0, 2)).toEqual([
      { type: 'payload', base: 'network', offset: 16, len: 2, dreg: NFT_REG_1 },
      { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: new Uint8Array([10, 2]) },
    ]);
    expect(compileRule({ match: { daddr: '!10.2.3.0/25' } }, ip)).toContainEqual(
      { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: new Uint8Array([255, 255, 255, 128]), xor: new Uint8Array(4) });
  });

  test('in an inet table an address match is preceded by meta nfproto', () => {
    const x = compileRule({ match: { saddr: '!@deny6' }, verdict: 'accept' }, inet);
    expect(x.slice(0, 2)).toEqual([{ type: 'meta', key: 'nfproto', dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: new Uint8Array([10]) }]);
    expect(x[3]).toEqual({ type: 'lookup', sreg: NFT_REG_1, set: 'deny6', invert: true });
  });

  test('a verdict map lookup loads the concatenation into consecutive registers', () => {
    expect(compileRule({ verdict: { vmap: { keys: ['daddr', 'protocol', 'dport'], map: 'svc' } } }, ip)).toEqual([
      { type: 'payload', base: 'network', offset: 16, len: 4, dreg: NFT_REG_1 },
      { type: 'meta', key: 'l4proto', dreg: NFT_REG32(1) },
      { type: 'payload', base: 'transport', offset: 2, len: 2, dreg: NFT_REG32(2) },
      { type: 'lookup', sreg: NFT_REG_1, set: 'svc', dreg: 0 },
    ]);
  });

  test('mark with a mask, ct state, log to a level, reject by family', () => {
    const x = compileRule({ match: { mark: '0x10/0xff', ctState: ['new', 'untracked'] }, log: { prefix: 'p: ', level: 'info' }, verdict: 'reject' }, ip);
    expect(x).toContainEqual({ type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(0xff), xor: u32host(0) });
    expect(x).toContainEqual({ type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(8 | 64), xor: u32host(0) });
    expect(x).toContainEqual({ type: 'log', prefix: 'p: ', level: 6 });
    expect(x[x.length - 1]).toEqual({ type: 'reject', reject: 'icmp', code: 3 });
    expect(compileRule({ verdict: 'reject' }, inet)).toEqual([{ type: 'reject', reject: 'icmpx', code: 1 }]);
  });

  test.each<[RuleSpec, RegExp]>([
    [{ match: { saddr: '10.0.0.300' } }, /^r\.match\.saddr: "10.0.0.300" is not an address or CIDR/],
    [{ match: { saddr: '10.0.0.1/24' } }, /^r\.match\.saddr: .*host bits set/],
    [{ match: { saddr: '::1' } }, /^r\.match\.saddr: an IPv6 value in a rule already limited to IPv4/],
    [{ match: { saddr: '@nope' } }, /^r\.match\.saddr: no set "nope" in this table/],
    [{ match: { saddr: '@svc' } }, /^r\.match\.saddr: svc is a map: use it with verdict.vmap/],
    [{ match: { dport: '2000-1000' } }, /^r\.match\.dport: "2000-1000": expected a port or LOW-HIGH/],
    [{ match: { protocol: 'tcpx' } }, /^r\.match\.protocol/],
    [{ match: { ctState: ['fresh' as 'new'] } }, /^r\.match\.ctState: "fresh": one of/],
    [{ match: { lookup: { keys: ['saddr', 'dport'], set: 'deny' } } }, /keys saddr \. dport do not fit set deny's type ipv4_addr/],
    [{ verdict: { vmap: { keys: ['saddr'], map: 'deny' } } }, /deny is not a verdict map/],
    [{ verdict: { reject: 'tcp-reset' } }, /tcp-reset needs match.protocol: tcp/],
    [{ match: { iifname: 'a-very-long-interface-name' } }, /not an interface name/],
    [{ log: { group: 1, level: 'warn' } }, /^r\.log: a log goes to a group or to the kernel log/],
    [{ match: { sport: 1, bogus: 1 } as unknown as RuleSpec['match'] }, /^r\.match\.bogus: unknown match/],
    [{ verdict: 'allow' as 'accept' }, /^r\.verdict: "allow"/],
    [{}, /a rule needs at least a match, a counter, a log or a verdict/],
  ])('refuses %j', (spec, re) => {
    expect(() => compileRule(spec, ip, 'r')).toThrow(re);
  });

  test('an address in a family without IP headers is refused', () => {
    expect(() => compileRule({ match: { saddr: '10.0.0.1' } }, { family: 'arp', sets: new Map() })).toThrow(/cannot be matched in a arp table/);
  });
});

describe('interval elements', () => {
  const hex = (els: { key: Uint8Array; intervalEnd?: boolean }[]) => els.map((e) => `${Buffer.from(e.key).toString('hex')}${e.intervalEnd ? '!' : ''}`);
  test('CIDRs and ranges become start and end elements; a set merges overlaps and neighbours', () => {
    const r = intervalElements(['10.0.0.0/8', '10.1.0.0/16', '11.0.0.0-11.0.0.9', '1.2.3.4', '255.255.255.255'].map((x) => parseRange('ipv4_addr', x)));
    expect('overlap' in r).toBe(false);
    expect(hex(r as never)).toEqual(['01020304', '01020305!', '0a000000', '0b00000a!', 'ffffffff']);
  });
  test('a map refuses overlapping ranges; adjacent ones need no end element between them', () => {
    const ports = ['1000-1999', '2000-2999'].map((x) => parseRange('inet_service', x));
    expect(hex(intervalElements(ports, [1, 2], () => {}) as never)).toEqual(['03e8', '07d0', '0bb8!']);
    expect(intervalElements(['10-20', '15'].map((x) => parseRange('inet_service', x)), [1, 2], () => {})).toEqual({ overlap: 1 });
  });
  test('bad ranges', () => {
    expect(() => parseRange('ipv4_addr', '10.0.0.9-10.0.0.1')).toThrow(/first address is after the last/);
    expect(() => parseRange('ipv6_addr', '10.0.0.1')).toThrow(/not an IPv6 address/);
    expect(() => parseRange('inet_service', '70000')).toThrow(/expected a port/);
  });
});

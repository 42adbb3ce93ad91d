// The one vocabulary of nftables rule expressions: every module that writes a rule (the nft backend's
// encoder, the IPVS companion table, the aggregator's typed rules) builds its NftExprs here rather than
// as object literals, so a match means the same bytes wherever it is written. Each builder returns
// exactly the object the kernel expression needs (no undefined fields) and allocates nothing more:
// the nft backend calls them once per rule of a full sync.
//
// Single expressions load into or read from the register they are given; the matches that return
// several expressions (`hasCtState`, `cidrMatch`, ...) work in NFT_REG_1, as nft does.
import {
  CT_STATE, IPPROTO, NFT_REG_1, NFT_REG_2, NFT_REG32, NFT_REG_VERDICT, RTN, ipAddr, ipv4, ipv6, port as portBytes,
  proto as protoByte, u32host,
  type NftCmpOp, type NftCtKey, type NftDataType, type NftExpr, type NftMetaKey, type NftVerdict,
} from './nft-types';

/** An IP family of a rule's addresses. */
export type IpFamily = 'ip' | 'ip6';

// Offsets of the addresses in the IPv4 and IPv6 headers.
const IP_SADDR = 12, IP_DADDR = 16, IP6_SADDR = 8, IP6_DADDR = 24;

/** Bytes of an address of the family. */
export const addrLen = (family: IpFamily): number => (family === 'ip' ? 4 : 16);
/** The set key type of an address of the family. */
export const addrType = (family: IpFamily): NftDataType => (family === 'ip' ? 'ipv4_addr' : 'ipv6_addr');
/** The k-th 4-byte register after an address loaded into NFT_REG_1 (where a concatenation goes on). */
export const regAfterAddr = (family: IpFamily, k = 0): number => NFT_REG32((family === 'ip' ? 1 : 4) + k);

/** The value of NFPROTO_IPV4 / NFPROTO_IPV6 (meta nfproto) and the ethertypes (meta protocol). */
const NFPROTO_IPV4 = 2, NFPROTO_IPV6 = 10;
const ETHERTYPE_IPV4 = 0x0800, ETHERTYPE_IPV6 = 0x86dd;
/** IFNAMSIZ: the kernel's interface name field, NUL padded. */
const IFNAMSIZ = 16;
/** IPS_DST_NAT: the conntrack status bit of a destination-NATed connection. */
export const CT_STATUS_DNAT = 0x20;

/** Network address and mask bytes of a CIDR (an address alone is a full-length prefix). */
export function cidrBytes(cidr: string): { net: Uint8Array; mask: Uint8Array } {
  const [a, l] = cidr.split('/');
  const addr = ipAddr(a);
  const bits = l === undefined ? addr.length * 8 : Number(l);
  const mask = new Uint8Array(addr.length);
  for (let i = 0; i < addr.length; i++) {
    const b = Math.max(0, Math.min(8, bits - i * 8));
    mask[i] = b === 0 ? 0 : (0xff << (8 - b)) & 0xff;
  }
  const net = addr.map((x, i) => x & mask[i]);
  return { net, mask };
}

/** An interface name as the kernel compares it: whole (NUL padded to IFNAMSIZ), or a prefix's bytes (nft's "NAME*"). */
function ifnameData(name: string, prefix: boolean): Uint8Array {
  const bytes = Buffer.from(name, 'utf8');
  const data = new Uint8Array(prefix ? bytes.length : IFNAMSIZ);
  data.set(bytes.subarray(0, IFNAMSIZ - 1));
  return data;
}

/** sreg & mask (u32, host order) compared with value: the test of flag bits in a mark or a ct field. */
function bitsCmp(load: NftExpr, mask: number, op: 'eq' | 'neq', value = 0): NftExpr[] {
  return [
    load,
    { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(mask), xor: u32host(0) },
    { type: 'cmp', sreg: NFT_REG_1, op, data: u32host(value) },
  ];
}

/** reg = (reg & ~bits) ^ bits, then stored by `store`: the bits set, the others kept. */
function orBits(load: NftExpr, bits: number, store: NftExpr): NftExpr[] {
  return [load, { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(~bits >>> 0), xor: u32host(bits) }, store];
}

export const expr = {
  // ---- loads: a field of the packet or its connection into a register ----

  /** <family> saddr / daddr. */
  saddr: (family: IpFamily, dreg = NFT_REG_1): NftExpr =>
    ({ type: 'payload', base: 'network', offset: family === 'ip' ? IP_SADDR : IP6_SADDR, len: addrLen(family), dreg }),
  daddr: (family: IpFamily, dreg = NFT_REG_1): NftExpr =>
    ({ type: 'payload', base: 'network', offset: family === 'ip' ? IP_DADDR : IP6_DADDR, len: addrLen(family), dreg }),
  /** The first `len` bytes of saddr / daddr (a byte-aligned prefix, as nft loads it). */
  addrPrefix: (family: IpFamily, which: 'saddr' | 'daddr', len: number, dreg = NFT_REG_1): NftExpr => ({
    type: 'payload', base: 'network',
    offset: which === 'saddr' ? (family === 'ip' ? IP_SADDR : IP6_SADDR) : (family === 'ip' ? IP_DADDR : IP6_DADDR), len, dreg,
  }),
  ipSaddr: (dreg: number): NftExpr => expr.saddr('ip', dreg),
  ipDaddr: (dreg: number): NftExpr => expr.daddr('ip', dreg),
  ip6Saddr: (dreg: number): NftExpr => expr.saddr('ip6', dreg),
  ip6Daddr: (dreg: number): NftExpr => expr.daddr('ip6', dreg),
  /** th sport / dport (tcp, udp, sctp: same offsets). */
  thSport: (dreg: number): NftExpr => ({ type: 'payload', base: 'transport', offset: 0, len: 2, dreg }),
  thDport: (dreg: number): NftExpr => ({ type: 'payload', base: 'transport', offset: 2, len: 2, dreg }),
  meta: (key: NftMetaKey, dreg: number): NftExpr => ({ type: 'meta', key, dreg }),
  l4proto: (dreg: number): NftExpr => ({ type: 'meta', key: 'l4proto', dreg }),
  ct: (key: NftCtKey, dreg: number): NftExpr => ({ type: 'ct', key, dreg }),
  ctState: (dreg: number): NftExpr => ({ type: 'ct', key: 'state', dreg }),
  /** ct original ip/ip6 daddr (the service IP before DNAT). */
  ctOrigDst: (dreg: number, family: IpFamily = 'ip'): NftExpr =>
    ({ type: 'ct', key: family === 'ip' ? 'dst_ip' : 'dst_ip6', dreg, dir: 'original' }),
  /** fib saddr / daddr type: the route type (RTN) of the address. */
  fibAddrType: (which: 'saddr' | 'daddr', dreg: number): NftExpr => ({ type: 'fib', flags: [which], result: 'addrtype', dreg }),
  fibDaddrType: (dreg: number): NftExpr => expr.fibAddrType('daddr', dreg),
  /** numgen random mod `mod` (+ offset). */
  numgenRandom: (mod: number, dreg: number, offset = 0): NftExpr => ({ type: 'numgen', mode: 'random', mod, offset, dreg }),
  immediate: (dreg: number, data: Uint8Array): NftExpr => ({ type: 'immediate', dreg, data }),
  /** Byte swap to network order (host-order counters compared with lt/gt). */
  hton: (reg: number, len: number, size: number): NftExpr => ({ type: 'byteorder', op: 'hton', sreg: reg, dreg: reg, len, size }),

  // ---- comparisons and lookups ----

  cmp: (sreg: number, op: NftCmpOp, data: Uint8Array): NftExpr => ({ type: 'cmp', sreg, op, data }),
  eq: (sreg: number, data: Uint8Array): NftExpr => ({ type: 'cmp', sreg, op: 'eq', data }),
  neq: (sreg: number, data: Uint8Array): NftExpr => ({ type: 'cmp', sreg, op: 'neq', data }),
  /** from <= reg <= to (eq), or outside (neq). */
  range: (sreg: number, op: 'eq' | 'neq', from: Uint8Array, to: Uint8Array): NftExpr => ({ type: 'range', sreg, op, from, to }),
  /** dreg = sreg & mask, over the mask's length. */
  and: (reg: number, mask: Uint8Array): NftExpr =>
    ({ type: 'bitwise', sreg: reg, dreg: reg, len: mask.length, mask, xor: new Uint8Array(mask.length) }),
  /** `... @set` (or `... != @set` with invert). */
  inSet: (sreg: number, set: string, invert = false): NftExpr =>
    (invert ? { type: 'lookup', sreg, set, invert: true } : { type: 'lookup', sreg, set }),
  /** `... map @set`: the set's data for the key into dreg. */
  mapLookup: (sreg: number, set: string, dreg: number): NftExpr => ({ type: 'lookup', sreg, set, dreg }),
  /** `... vmap @set`: lookup with dreg = verdict register. */
  vmap: (sreg: number, set: string): NftExpr => ({ type: 'lookup', sreg, set, dreg: NFT_REG_VERDICT }),
  /** `update @set { key }`: add the key in sreg, or refresh its timeout. */
  updateSet: (set: string, sregKey: number): NftExpr => ({ type: 'dynset', op: 'update', set, sregKey }),

  // ---- matches: a load and its test, in NFT_REG_1 ----

  /** <family> saddr/daddr in a CIDR: load, mask, compare (nothing for a /0, which every address is in). */
  cidrMatch: (load: NftExpr, cidr: string): NftExpr[] => {
    const { net, mask } = cidrBytes(cidr);
    if (mask.every((b) => b === 0)) return [];
    return [load, expr.and(NFT_REG_1, mask), { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: net }];
  },
  /** meta l4proto P. */
  protoIs: (p: keyof typeof IPPROTO | number): NftExpr[] =>
    [{ type: 'meta', key: 'l4proto', dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: protoByte(p) }],
  /** `iifname NAME` / `oifname "PREFIX*"` (op neq: `!=`); the name is not checked (see iifnameMatch). */
  ifnameIs: (key: 'iifname' | 'oifname', name: string, prefix: boolean, op: 'eq' | 'neq' = 'eq'): NftExpr[] =>
    [{ type: 'meta', key, dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op, data: ifnameData(name, prefix) }],
  /**
   * `iifname NAME` / `iifname "PREFIX*"`: the incoming interface's name (all NULs for a locally generated
   * packet) compared whole (the name and its NUL padding) or on the prefix's bytes only, as nft does.
   */
  iifnameMatch: (name: string, prefix: boolean): NftExpr[] => {
    const n = Buffer.byteLength(name, 'utf8');
    if (n === 0 || n >= IFNAMSIZ) throw new Error(`iifname ${JSON.stringify(name)}: an interface name has 1 to ${IFNAMSIZ - 1} bytes`);
    return expr.ifnameIs('iifname', name, prefix);
  },
  /** meta nfproto ipv4/ipv6 (inet tables). */
  nfprotoIs: (family: IpFamily): NftExpr[] =>
    [{ type: 'meta', key: 'nfproto', dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: new Uint8Array([family === 'ip' ? NFPROTO_IPV4 : NFPROTO_IPV6]) }],
  /** meta protocol ip/ip6: the ethertype (bridge and netdev tables). */
  etherTypeIs: (family: IpFamily): NftExpr[] => {
    const t = family === 'ip' ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6;
    return [{ type: 'meta', key: 'protocol', dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: new Uint8Array([t >> 8, t & 0xff]) }];
  },
  /** fib saddr/daddr type local. */
  fibLocal: (which: 'saddr' | 'daddr'): NftExpr[] =>
    [expr.fibAddrType(which, NFT_REG_1), { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: u32host(RTN.local) }],
  /** ct state in any of `states` (CT_STATE bits): `ct state new`, `ct state established,related`. */
  hasCtState: (states: number): NftExpr[] => bitsCmp(expr.ctState(NFT_REG_1), states, 'neq'),
  /** ct state in none of `states`: `ct state != established,related`. */
  lacksCtState: (states: number): NftExpr[] => bitsCmp(expr.ctState(NFT_REG_1), states, 'eq'),
  /** `ct state new` (kpng's most common match). */
  ctNew: (): NftExpr[] => expr.hasCtState(CT_STATE.new),
  /** ct status has any of `bits` (e.g. CT_STATUS_DNAT: `ct status dnat`) / none of them. */
  hasCtStatus: (bits: number): NftExpr[] => bitsCmp(expr.ct('status', NFT_REG_1), bits, 'neq'),
  lacksCtStatus: (bits: number): NftExpr[] => bitsCmp(expr.ct('status', NFT_REG_1), bits, 'eq'),
  /** meta mark & bits != 0 / == 0. */
  hasMetaMark: (bits: number): NftExpr[] => bitsCmp(expr.meta('mark', NFT_REG_1), bits, 'neq'),
  lacksMetaMark: (bits: number): NftExpr[] => bitsCmp(expr.meta('mark', NFT_REG_1), bits, 'eq'),
  /** (meta mark & mask) == value, or != with neq (mask 0xffffffff: the whole mark, no bitwise). */
  metaMarkIs: (value: number, mask: number, op: 'eq' | 'neq'): NftExpr[] =>
    (mask === 0xffffffff
      ? [expr.meta('mark', NFT_REG_1), { type: 'cmp', sreg: NFT_REG_1, op, data: u32host(value) }]
      : bitsCmp(expr.meta('mark', NFT_REG_1), mask, op, value)),
  /** ct mark & bits != 0. */
  hasCtMark: (bits: number): NftExpr[] => bitsCmp(expr.ct('mark', NFT_REG_1), bits, 'neq'),

  // ---- statements ----

  /** meta mark set meta mark | bits. */
  setMetaMarkBits: (bits: number): NftExpr[] =>
    orBits(expr.meta('mark', NFT_REG_1), bits, { type: 'metaSet', key: 'mark', sreg: NFT_REG_1 }),
  /** meta mark set meta mark ^ bits (clears bits known to be set). */
  toggleMetaMarkBits: (bits: number): NftExpr[] => [
    expr.meta('mark', NFT_REG_1),
    { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(0xffffffff), xor: u32host(bits) },
    { type: 'metaSet', key: 'mark', sreg: NFT_REG_1 },
  ],
  /** meta mark set VALUE. */
  setMetaMark: (value: number): NftExpr[] =>
    [expr.immediate(NFT_REG_1, u32host(value)), { type: 'metaSet', key: 'mark', sreg: NFT_REG_1 }],
  /** ct mark set ct mark | bits. */
  setCtMarkBits: (bits: number): NftExpr[] =>
    orBits(expr.ct('mark', NFT_REG_1), bits, { type: 'ctSet', key: 'mark', sreg: NFT_REG_1 }),
  /** dnat to the address in regAddr and the port in regPort. */
  dnat: (family: IpFamily, regAddr: number, regPort: number): NftExpr =>
    ({ type: 'nat', nat: 'dnat', family, regAddrMin: regAddr, regProtoMin: regPort }),
  /** dnat to addr[:port] (by family), loading both into registers 1 and 2. */
  dnatTo: (family: IpFamily, addr: string, p?: number): NftExpr[] => (p === undefined
    ? [expr.immediate(NFT_REG_1, family === 'ip' ? ipv4(addr) : ipv6(addr)), { type: 'nat', nat: 'dnat', family, regAddrMin: NFT_REG_1 }]
    : [
      expr.immediate(NFT_REG_1, family === 'ip' ? ipv4(addr) : ipv6(addr)), expr.immediate(NFT_REG_2, portBytes(p)),
      expr.dnat(family, NFT_REG_1, NFT_REG_2),
    ]),
  /** masquerade [fully-random]. */
  masquerade: (fullyRandom = false): NftExpr => (fullyRandom ? { type: 'masq', flags: { fullyRandom: true } } : { type: 'masq' }),
  counter: (): NftExpr => ({ type: 'counter' }),
  /** log [prefix P] [level L | group G]. */
  log: (opts: { prefix?: string; level?: number; group?: number } = {}): NftExpr => ({ type: 'log', ...opts }),
  /** flow add @flowtable. */
  flowOffload: (flowtable: string): NftExpr => ({ type: 'flowOffload', flowtable }),
  /** reject with icmp (IPv4) / icmpv6 `code`. */
  rejectIcmp: (code: number): NftExpr => ({ type: 'reject', reject: 'icmp', code }),
  /** reject with icmpx `code` (inet, bridge, netdev: ICMP or ICMPv6 by the packet). */
  rejectIcmpx: (code: number): NftExpr => ({ type: 'reject', reject: 'icmpx', code }),
  /** reject with icmp(v6) port-unreachable: code 3 for ICMP, 4 for ICMPv6. */
  rejectPortUnreachable: (family: IpFamily): NftExpr => expr.rejectIcmp(family === 'ip' ? 3 : 4),
  rejectIcmpPortUnreach: (): NftExpr => expr.rejectIcmp(3),
  rejectIcmpxPortUnreach: (): NftExpr => expr.rejectIcmpx(1),
  tcpReset: (): NftExpr => ({ type: 'reject', reject: 'tcpReset' }),

  // ---- verdicts ----

  verdict: (verdict: NftVerdict): NftExpr => ({ type: 'verdict', verdict }),
  accept: (): NftExpr => ({ type: 'verdict', verdict: 'accept' }),
  drop: (): NftExpr => ({ type: 'verdict', verdict: 'drop' }),
  ret: (): NftExpr => ({ type: 'verdict', verdict: 'return' }),
  jump: (chain: string): NftExpr => ({ type: 'verdict', verdict: { jump: chain } }),
  goto: (chain: string): NftExpr => ({ type: 'verdict', verdict: { goto: chain } }),
};

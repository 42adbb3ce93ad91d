// Public types of the native nftables transport (src/native/index.ts) and the encoders of set keys
// and data (the expression builders are in nft-expr.ts). A backend describes tables, chains, sets, elements
// and rules with these types; `nftApply(ops)` sends them to the kernel as ONE atomic netlink batch.
//
// Conventions
// - Numbers in keys/data are raw bytes in the byte order the kernel compares them in: addresses and
//   ports in network byte order (use the builders below), marks / numgen values / meta keys in host
//   byte order (`u32host`).
// - Registers: NFT_REG_VERDICT (0), NFT_REG_1..4 (16-byte registers) or NFT_REG32(n) (n = 0..15,
//   4-byte registers; NFT_REG32(0) is the first word of NFT_REG_1). Concatenations are loaded into
//   consecutive 4-byte registers, every field padded to 4 bytes (see `concat`).
// - Timeouts are milliseconds. Rule handles are numbers (kernel u64, safe below 2^53).
import { ipv6Words } from '../model/ip';

export type NftFamily = 'ip' | 'ip6' | 'inet' | 'arp' | 'bridge' | 'netdev';

export const NFPROTO: Record<NftFamily, number> = { inet: 1, ip: 2, arp: 3, netdev: 5, bridge: 7, ip6: 10 };

export type NftHook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting' | 'ingress';
export type NftChainType = 'filter' | 'nat' | 'route';

/** Verdicts: a keyword, or a jump/goto to a chain of the same table. */
export type NftVerdict = 'accept' | 'drop' | 'continue' | 'return' | { jump: string } | { goto: string };

export interface NftTable {
  family: NftFamily;
  name: string;
  /** Table flags: dormant. */
  dormant?: boolean;
  comment?: string;
}

export interface NftChain {
  family: NftFamily;
  table: string;
  name: string;
  /** Base chains only: hook, type, priority (default 0), policy (default accept), device for netdev. */
  hook?: NftHook;
  type?: NftChainType;
  priority?: number;
  policy?: 'accept' | 'drop';
  device?: string;
  comment?: string;
}

/**
 * Data types of set keys and map data, as nft names them. A concatenation is an array
 * (['ipv4_addr', 'inet_proto', 'inet_service']). 'integer' needs an explicit keyLen / dataLen.
 */
export type NftDataType =
  | 'verdict' | 'nf_proto' | 'integer' | 'string' | 'ipv4_addr' | 'ipv6_addr' | 'ether_addr' | 'ether_type'
  | 'inet_proto' | 'inet_service' | 'icmp_type' | 'mark' | 'ifindex' | 'ct_state' | 'ifname';

/** nft's datatype ids (stored in the set so `nft list` prints the right types) and sizes in bytes. */
export const NFT_DATATYPES: Record<NftDataType, { id: number; len: number }> = {
  verdict: { id: 1, len: 0 }, nf_proto: { id: 2, len: 1 }, integer: { id: 4, len: 0 }, string: { id: 5, len: 0 },
  ipv4_addr: { id: 7, len: 4 }, ipv6_addr: { id: 8, len: 16 }, ether_addr: { id: 9, len: 6 },
  ether_type: { id: 10, len: 2 }, inet_proto: { id: 12, len: 1 }, inet_service: { id: 13, len: 2 },
  icmp_type: { id: 14, len: 1 }, mark: { id: 19, len: 4 }, ifindex: { id: 20, len: 4 },
  ct_state: { id: 26, len: 4 }, ifname: { id: 41, len: 16 },
};

export interface NftSet {
  family: NftFamily;
  table: string;
  /** Name; a name containing "%d" (e.g. "__map%d") makes the kernel pick one (anonymous sets). */
  name: string;
  /** Transaction-local id, so rules/elements in the same batch can refer to the set by `setId`. */
  id?: number;
  keyType: NftDataType | NftDataType[];
  /** Required for 'integer' / 'string' keys; otherwise computed (concat fields padded to 4 bytes). */
  keyLen?: number;
  /** Present => this is a map. 'verdict' => verdict map. */
  dataType?: NftDataType | NftDataType[];
  dataLen?: number;
  flags?: { constant?: boolean; interval?: boolean; timeout?: boolean; dynamic?: boolean; anonymous?: boolean };
  /** Default element timeout in ms (requires flags.timeout). */
  timeout?: number;
  gcInterval?: number;
  /** Expected number of elements (sizing hint; also the max for dynamic sets). */
  size?: number;
  policy?: 'performance' | 'memory';
  comment?: string;
}

export interface NftElement {
  key: Uint8Array;
  /** End of the range (inclusive) for concatenated interval sets. */
  keyEnd?: Uint8Array;
  /** Single-field interval sets: marks the (exclusive) end of a range, as nft does. */
  intervalEnd?: boolean;
  /** Map data (non-verdict maps). */
  data?: Uint8Array;
  /** Verdict map data. */
  verdict?: NftVerdict;
  /** Element timeout in ms. */
  timeout?: number;
  comment?: string;
}

export interface NftElements {
  family: NftFamily;
  table: string;
  /** Set name, or `setId` for a set created in the same batch with `id` (anonymous sets). */
  set: string;
  setId?: number;
  elements: NftElement[];
}

export interface NftRule {
  family: NftFamily;
  table: string;
  chain: string;
  /** replace/delete: the rule's handle. */
  handle?: number;
  /** add: append after this handle; insert: insert before this handle. */
  position?: number;
  exprs: NftExpr[];
  comment?: string;
}

export type NftCmpOp = 'eq' | 'neq' | 'lt' | 'lte' | 'gt' | 'gte';
export type NftPayloadBase = 'll' | 'network' | 'transport' | 'inner';
export type NftMetaKey =
  | 'len' | 'protocol' | 'priority' | 'mark' | 'iif' | 'oif' | 'iifname' | 'oifname' | 'iiftype' | 'oiftype'
  | 'skuid' | 'skgid' | 'nftrace' | 'rtclassid' | 'secmark' | 'nfproto' | 'l4proto' | 'pkttype' | 'cpu'
  | 'iifgroup' | 'oifgroup' | 'cgroup' | 'prandom';
export type NftCtKey =
  | 'state' | 'direction' | 'status' | 'mark' | 'expiration' | 'l3protocol' | 'src' | 'dst' | 'protocol'
  | 'proto_src' | 'proto_dst' | 'packets' | 'bytes' | 'zone' | 'src_ip' | 'dst_ip' | 'src_ip6' | 'dst_ip6';

/** Rule expressions (the kernel's nf_tables expressions, one to one). */
export type NftExpr =
  | { type: 'payload'; base: NftPayloadBase; offset: number; len: number; dreg: number }
  | { type: 'meta'; key: NftMetaKey; dreg: number }
  | { type: 'metaSet'; key: NftMetaKey; sreg: number }
  | { type: 'cmp'; sreg: number; op: NftCmpOp; data: Uint8Array }
  | { type: 'range'; sreg: number; op: 'eq' | 'neq'; from: Uint8Array; to: Uint8Array }
  /** dreg = (sreg & mask) ^ xor over len bytes. */
  | { type: 'bitwise'; sreg: number; dreg: number; len: number; mask: Uint8Array; xor: Uint8Array }
  /** Set/map lookup of sreg (key length = the set's key length); with dreg for maps (dreg 0 = verdict map). */
  | { type: 'lookup'; sreg: number; set: string; setId?: number; dreg?: number; invert?: boolean }
  | { type: 'immediate'; dreg: number; data: Uint8Array }
  | { type: 'verdict'; verdict: NftVerdict }
  /** dreg = (random or incrementing counter) mod `mod` + offset. */
  | { type: 'numgen'; mode: 'random' | 'inc'; mod: number; offset?: number; dreg: number }
  | { type: 'ct'; key: NftCtKey; dreg: number; dir?: 'original' | 'reply' }
  | { type: 'ctSet'; key: 'mark' | 'zone'; sreg: number }
  /** dnat/snat to the address in regAddrMin (..Max) and port in regProtoMin (..Max). */
  | {
      type: 'nat'; nat: 'dnat' | 'snat'; family: 'ip' | 'ip6';
      regAddrMin?: number; regAddrMax?: number; regProtoMin?: number; regProtoMax?: number;
      flags?: { random?: boolean; fullyRandom?: boolean; persistent?: boolean };
    }
  | { type: 'masq'; regProtoMin?: number; regProtoMax?: number; flags?: { random?: boolean; fullyRandom?: boolean; persistent?: boolean } }
  /** icmp: ICMP(v6) unreachable with `code`; tcpReset; icmpx (inet): NFT_REJECT_ICMPX_* code (1 = port-unreachable). */
  | { type: 'reject'; reject: 'icmp' | 'tcpReset' | 'icmpx'; code?: number }
  | { type: 'counter'; packets?: number; bytes?: number }
  /** Add/update the key in sregKey (and data in sregData) into a dynamic set, with a timeout (ms). */
  | { type: 'dynset'; op: 'add' | 'update' | 'delete'; set: string; setId?: number; sregKey: number; sregData?: number; timeout?: number }
  /** fib lookup: e.g. { flags: ['daddr'], result: 'addrtype', dreg } then cmp with RTN_LOCAL (u32host(2)). */
  | { type: 'fib'; flags: ('saddr' | 'daddr' | 'mark' | 'iif' | 'oif' | 'present')[]; result: 'oif' | 'oifname' | 'addrtype'; dreg: number }
  | { type: 'log'; prefix?: string; group?: number; level?: number; snaplen?: number; qthreshold?: number }
  | { type: 'limit'; rate: number; unit: 'second' | 'minute' | 'hour' | 'day'; burst?: number; bytes?: boolean; invert?: boolean }
  | { type: 'notrack' }
  /** dreg = byte-swapped sreg, `len` bytes in words of `size` (2, 4 or 8): host-order values compared with lt/gt. */
  | { type: 'byteorder'; op: 'hton' | 'ntoh'; sreg: number; dreg: number; len: number; size: number }
  /** Offload the packet's connection to a flowtable of the same table (`flow add @name`). */
  | { type: 'flowOffload'; flowtable: string };

/**
 * A flowtable: established connections forwarded between its devices skip the netfilter hooks (the
 * kernel's fast path), once a rule's `flowOffload` added them. Adding an existing flowtable adds
 * the devices it lacks; every device must exist.
 */
export interface NftFlowtable {
  family: NftFamily;
  table: string;
  name: string;
  /** Ingress hook priority (default 0). */
  priority?: number;
  devices: string[];
  /** Count packets and bytes of offloaded flows in conntrack (NFT_FLOWTABLE_COUNTER). */
  counter?: boolean;
}

/** One operation of a batch. Ops are applied in order, in one transaction. */
export type NftOp =
  | { op: 'add' | 'create' | 'delete' | 'destroy' | 'flush'; table: NftTable }
  | { op: 'add' | 'create' | 'delete' | 'destroy' | 'flush'; chain: NftChain }
  | { op: 'add' | 'create' | 'delete' | 'destroy' | 'flush'; set: NftSet }
  | { op: 'add' | 'create' | 'delete' | 'destroy'; elements: NftElements }
  | { op: 'add' | 'insert' | 'replace' | 'delete' | 'destroy'; rule: NftRule }
  | { op: 'add' | 'create' | 'delete' | 'destroy'; flowtable: NftFlowtable };
// add = create or keep (NLM_F_CREATE); create = fail with EEXIST if present; delete = fail with ENOENT if
// absent; destroy = delete if present (kernel >= 6.3); flush table/chain = delete their rules; flush set =
// delete its elements.

/** Result of a successful apply. */
export interface ApplyResult {
  /** Netlink messages in the batch (including BATCH_BEGIN/END) and their total size in bytes. */
  messages: number;
  bytes: number;
  /** Time spent in the worker thread (building + kernel), and in TS encoding. */
  ms: number;
  encodeMs: number;
  /** Of `ms`: the addon building the netlink messages (libnftnl); the rest is socket + kernel. */
  buildMs?: number;
  /** Hand-off: queued -> a worker thread took it, and the worker finished -> the JS thread ran the result. */
  queueMs?: number;
  returnMs?: number;
}

/** One object the kernel refused. `index` is the op's position in the ops array (or NftBatch). */
export interface NftFailure {
  index: number;
  op: string;
  /** e.g. "rule ip/kpng/svc-abc #3" or "element #12 of set ip/kpng/service-ips". */
  object: string;
  /** Element index within the op, for element ops. */
  element?: number;
  errno: number;
  code: string;
  /** Kernel extended-ack message, if any. */
  message?: string;
}

/** Error thrown by nftApply: the batch was rejected and nothing was applied. */
export interface NftApplyError extends Error {
  errno: number;
  code: string;
  failed: NftFailure[];
}

// ---- listing ----

export interface NftTableInfo { family: NftFamily; name: string; handle: number; flags: number; comment?: string }
export interface NftChainInfo extends NftChain { handle: number }
export interface NftElementInfo {
  key: Uint8Array; keyEnd?: Uint8Array; data?: Uint8Array; verdict?: NftVerdict;
  intervalEnd?: boolean; timeout?: number; expires?: number; comment?: string;
}
export interface NftSetInfo {
  family: NftFamily; table: string; name: string; handle: number;
  flags: number; keyType: number; keyLen: number; dataType?: number; dataLen?: number; timeout?: number;
  /** The capacity the set was created with (absent: none given). */
  size?: number;
  comment?: string;
  elements: NftElementInfo[];
}
export interface NftRuleInfo {
  family: NftFamily; table: string; chain: string; handle: number; comment?: string;
  /** Decoded expressions (same shapes as NftExpr; unknown ones as { type: name, raw }). */
  exprs: (NftExpr | { type: string; raw: Record<number, Uint8Array> })[];
}
export interface NftTableListing {
  table: NftTableInfo;
  chains: NftChainInfo[];
  sets: NftSetInfo[];
  rules: NftRuleInfo[];
}

// ---- conntrack ----

export interface ConntrackFilter {
  family: 'ip' | 'ip6';
  proto: 'udp' | 'tcp' | 'sctp';
  /** Original destination address (the service IP), as a string. */
  origDst?: string;
  /** Original destination port (service port or node port). */
  dport?: number;
  /** Reply source address (the endpoint IP after DNAT). */
  replySrc?: string;
  /** Reply source port (the endpoint's port). */
  replySport?: number;
  /** Only DNATed entries whose reply source is none of these (the endpoints still in use). */
  keepReplySrc?: string[];
}

/** Options common to all native calls. */
export interface NativeCallOptions {
  /** Path of a network namespace (e.g. /var/run/netns/foo): the netlink socket is opened inside it. */
  netns?: string;
}

// ---- registers ----

export const NFT_REG_VERDICT = 0;
export const NFT_REG_1 = 1;
export const NFT_REG_2 = 2;
export const NFT_REG_3 = 3;
export const NFT_REG_4 = 4;
/** 4-byte register n (0..15). NFT_REG32(0..3) overlay NFT_REG_1. */
export const NFT_REG32 = (n: number): number => 8 + n;

// ---- key / data encoding ----

/** IPv4 address "10.0.0.1" -> 4 bytes (network order). */
export function ipv4(addr: string): Uint8Array {
  const b = new Uint8Array(4);
  writeIPv4(b, 0, addr);
  return b;
}

/** Writes an IPv4 address's 4 bytes (network order) at b[o..o+3], without allocating. */
export function writeIPv4(b: Uint8Array | number[], o: number, addr: string): void {
  let part = 0, val = 0, digits = 0;
  for (let i = 0; i <= addr.length; i++) {
    const c = i < addr.length ? addr.charCodeAt(i) : 46;
    if (c === 46) { // '.'
      if (digits === 0 || val > 255 || part > 3) throw new Error(`bad IPv4 address: ${addr}`);
      b[o + part++] = val;
      val = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57 && digits < 3) {
      val = val * 10 + (c - 48);
      digits++;
    } else {
      throw new Error(`bad IPv4 address: ${addr}`);
    }
  }
  if (part !== 4) throw new Error(`bad IPv4 address: ${addr}`);
}

/** IPv6 address (any textual form incl. "::", embedded IPv4) -> 16 bytes. */
export function ipv6(addr: string): Uint8Array {
  const words = ipv6Words(addr);
  if (!words) throw new Error(`bad IPv6 address: ${addr}`);
  const b = new Uint8Array(16);
  words.forEach((w, i) => { b[2 * i] = w >> 8; b[2 * i + 1] = w & 0xff; });
  return b;
}

/** IPv4 or IPv6 address bytes, by syntax. */
export function ipAddr(addr: string): Uint8Array {
  return addr.includes(':') ? ipv6(addr) : ipv4(addr);
}

/** Writes an address's bytes at b[o..] (4 for IPv4, without allocating; 16 for IPv6); returns the offset after them. */
export function writeAddr(b: Uint8Array, o: number, addr: string): number {
  if (addr.includes(':')) { b.set(ipv6(addr), o); return o + 16; }
  writeIPv4(b, o, addr);
  return o + 4;
}

/** 16-bit port in network byte order (inet_service). */
export function port(p: number): Uint8Array {
  return new Uint8Array([(p >> 8) & 0xff, p & 0xff]);
}

export const IPPROTO = { icmp: 1, tcp: 6, udp: 17, icmpv6: 58, sctp: 132 } as const;

/** L4 protocol byte (inet_proto). */
export function proto(p: keyof typeof IPPROTO | number): Uint8Array {
  return new Uint8Array([typeof p === 'number' ? p : IPPROTO[p]]);
}

/** 32-bit value in host byte order (mark, numgen result, meta keys, fib addrtype). */
export function u32host(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, true);
  return b;
}

/** 32-bit value in network byte order. */
export function u32be(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, false);
  return b;
}

/** Interface name as a 16-byte zero-padded key (ifname). */
export function ifname(name: string): Uint8Array {
  const b = new Uint8Array(16);
  b.set(Buffer.from(name, 'utf8').subarray(0, 15));
  return b;
}

/** Concatenation: every field padded to a multiple of 4 bytes (one register per 4 bytes). */
export function concat(...fields: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const f of fields) n += (f.length + 3) & ~3;
  const out = new Uint8Array(n);
  let o = 0;
  for (const f of fields) { out.set(f, o); o += (f.length + 3) & ~3; }
  return out;
}

/** Length in bytes of a set key / map data of this type (concatenations padded per field). */
export function dataTypeLen(t: NftDataType | NftDataType[]): number {
  if (Array.isArray(t)) {
    if (t.length === 1) return dataTypeLen(t[0]);
    return t.reduce((n, x) => n + ((NFT_DATATYPES[x].len + 3) & ~3), 0);
  }
  return NFT_DATATYPES[t].len;
}

/** nft's datatype id of a (possibly concatenated) type: ids shifted by 6 bits per field. */
export function dataTypeId(t: NftDataType | NftDataType[]): number {
  const list = Array.isArray(t) ? t : [t];
  let id = 0;
  for (const x of list) id = id * 64 + NFT_DATATYPES[x].id;
  return id;
}

// The expression builders (`expr.ctState`, `expr.daddr`, ...) are in nft-expr.ts.

/** Route types for fib addrtype. */
export const RTN = { unicast: 1, local: 2, broadcast: 3, anycast: 4, multicast: 5, blackhole: 6 } as const;
/** ct state bits. */
export const CT_STATE = { invalid: 1, established: 2, related: 4, new: 8, untracked: 64 } as const;

// Compact encoding of nftables operations for the native addon: ONE Buffer per batch crosses N-API.
//
// Layout (little-endian, host order; the addon refuses big-endian hosts):
//   header : u32 magic 'KPNB' | u32 version (1) | u32 record count
//   record : u8 op | u8 kind | u8 family (NFPROTO) | u8 0 | u32 body length | body
//   body   : items  u8 tag | u8 id | u16 len | len bytes
//     tag 1 ATTR      libnftnl object attribute (nftnl_{table,chain,set,rule}_set_data(id, bytes))
//     tag 2 EXPR      start of a rule expression, bytes = expression name ("payload", "cmp", ...)
//     tag 3 EXPR_ATTR libnftnl expression attribute of the current expression (nftnl_expr_set(id, bytes))
//     tag 4 ELEM      one set element, bytes = the netlink attributes inside NFTA_LIST_ELEM (pre-encoded
//                     here, so the addon only frames them: no per-element allocation in C++)
// Strings are NUL-terminated. Element ops: ATTR ids are NFTNL_SET_TABLE / NAME / ID.
import {
  NFPROTO, dataTypeId, dataTypeLen, NFT_DATATYPES,
  type NftChain, type NftElement, type NftElements, type NftExpr, type NftFamily, type NftFlowtable, type NftOp, type NftRule,
  type NftSet, type NftTable, type NftVerdict,
} from './nft-types';

export const OP = { add: 1, create: 2, delete: 3, destroy: 4, flush: 5, insert: 6, replace: 7 } as const;
export const KIND = { table: 1, chain: 2, set: 3, elements: 4, rule: 5, flowtable: 6 } as const;
export type OpName = keyof typeof OP;
export type KindName = keyof typeof KIND;

const TAG_ATTR = 1, TAG_EXPR = 2, TAG_EXPR_ATTR = 3, TAG_ELEM = 4;

// libnftnl attribute ids (libnftnl/{table,chain,set,rule,expr}.h); checked against the addon in tests.
export const A = {
  TABLE_NAME: 0, TABLE_FLAGS: 2, TABLE_USERDATA: 5,
  CHAIN_NAME: 0, CHAIN_TABLE: 2, CHAIN_HOOKNUM: 3, CHAIN_PRIO: 4, CHAIN_POLICY: 5, CHAIN_TYPE: 10, CHAIN_DEV: 11,
  CHAIN_USERDATA: 15,
  SET_TABLE: 0, SET_NAME: 1, SET_FLAGS: 2, SET_KEY_TYPE: 3, SET_KEY_LEN: 4, SET_DATA_TYPE: 5, SET_DATA_LEN: 6,
  SET_ID: 8, SET_POLICY: 9, SET_DESC_SIZE: 10, SET_TIMEOUT: 11, SET_GC_INTERVAL: 12, SET_USERDATA: 13,
  SET_DESC_CONCAT: 16,
  RULE_TABLE: 1, RULE_CHAIN: 2, RULE_HANDLE: 3, RULE_POSITION: 6, RULE_USERDATA: 7,
  FLOWTABLE_NAME: 0, FLOWTABLE_TABLE: 2, FLOWTABLE_HOOKNUM: 3, FLOWTABLE_PRIO: 4, FLOWTABLE_DEVICES: 6, FLOWTABLE_FLAGS: 8,
} as const;

type W = 'u8' | 'u16' | 'u32' | 'u64' | 'str' | 'bytes';
/** Expression attribute tables: field name -> [libnftnl id, width]. Ids start at NFTNL_EXPR_BASE = 1. */
export const EXPR_ATTRS: Record<string, Record<string, [number, W]>> = {
  payload: { dreg: [1, 'u32'], base: [2, 'u32'], offset: [3, 'u32'], len: [4, 'u32'], sreg: [5, 'u32'] },
  numgen: { dreg: [1, 'u32'], mod: [2, 'u32'], mode: [3, 'u32'], offset: [4, 'u32'] },
  meta: { key: [1, 'u32'], dreg: [2, 'u32'], sreg: [3, 'u32'] },
  cmp: { sreg: [1, 'u32'], op: [2, 'u32'], data: [3, 'bytes'] },
  range: { sreg: [1, 'u32'], op: [2, 'u32'], from: [3, 'bytes'], to: [4, 'bytes'] },
  immediate: { dreg: [1, 'u32'], data: [2, 'bytes'], verdict: [3, 'u32'], chain: [4, 'str'] },
  counter: { packets: [1, 'u64'], bytes: [2, 'u64'] },
  bitwise: { sreg: [1, 'u32'], dreg: [2, 'u32'], len: [3, 'u32'], mask: [4, 'bytes'], xor: [5, 'bytes'] },
  nat: {
    nat: [1, 'u32'], family: [2, 'u32'], regAddrMin: [3, 'u32'], regAddrMax: [4, 'u32'],
    regProtoMin: [5, 'u32'], regProtoMax: [6, 'u32'], flags: [7, 'u32'],
  },
  lookup: { sreg: [1, 'u32'], dreg: [2, 'u32'], set: [3, 'str'], setId: [4, 'u32'], flags: [5, 'u32'] },
  dynset: {
    sregKey: [1, 'u32'], sregData: [2, 'u32'], op: [3, 'u32'], timeout: [4, 'u64'], set: [5, 'str'], setId: [6, 'u32'],
  },
  log: { prefix: [1, 'str'], group: [2, 'u16'], snaplen: [3, 'u32'], qthreshold: [4, 'u16'], level: [5, 'u32'] },
  ct: { dreg: [1, 'u32'], key: [2, 'u32'], dir: [3, 'u8'], sreg: [4, 'u32'] },
  limit: { rate: [1, 'u64'], unit: [2, 'u64'], burst: [3, 'u32'], type: [4, 'u32'], flags: [5, 'u32'] },
  reject: { reject: [1, 'u32'], code: [2, 'u8'] },
  masq: { flags: [1, 'u32'], regProtoMin: [2, 'u32'], regProtoMax: [3, 'u32'] },
  fib: { dreg: [1, 'u32'], result: [2, 'u32'], flags: [3, 'u32'] },
  notrack: {},
  byteorder: { dreg: [1, 'u32'], sreg: [2, 'u32'], op: [3, 'u32'], len: [4, 'u32'], size: [5, 'u32'] },
  flow_offload: { table: [1, 'str'] },
};

// kernel enums
export const PAYLOAD_BASE = { ll: 0, network: 1, transport: 2, inner: 3 } as const;
export const CMP_OP = { eq: 0, neq: 1, lt: 2, lte: 3, gt: 4, gte: 5 } as const;
export const META_KEY = {
  len: 0, protocol: 1, priority: 2, mark: 3, iif: 4, oif: 5, iifname: 6, oifname: 7, iiftype: 8, oiftype: 9,
  skuid: 10, skgid: 11, nftrace: 12, rtclassid: 13, secmark: 14, nfproto: 15, l4proto: 16, pkttype: 19, cpu: 20,
  iifgroup: 21, oifgroup: 22, cgroup: 23, prandom: 24,
} as const;
export const CT_KEY = {
  state: 0, direction: 1, status: 2, mark: 3, expiration: 5, l3protocol: 7, src: 8, dst: 9, protocol: 10,
  proto_src: 11, proto_dst: 12, packets: 14, bytes: 15, zone: 17, src_ip: 19, dst_ip: 20, src_ip6: 21, dst_ip6: 22,
} as const;
export const VERDICT = { drop: 0, accept: 1, continue: -1, break: -2, jump: -3, goto: -4, return: -5 } as const;
export const HOOK = { prerouting: 0, input: 1, forward: 2, output: 3, postrouting: 4, ingress: 0 } as const;
export const SET_F = {
  anonymous: 0x1, constant: 0x2, interval: 0x4, map: 0x8, timeout: 0x10, dynamic: 0x20, object: 0x40, concat: 0x80,
} as const;
const NAT_F = { persistent: 8, random: 4, fullyRandom: 16 };
const FIB_F = { saddr: 1, daddr: 2, mark: 4, iif: 8, oif: 16, present: 32 };
const FIB_RESULT = { oif: 1, oifname: 2, addrtype: 3 };
const LIMIT_UNIT = { second: 1, minute: 60, hour: 3600, day: 86400 };
const REJECT_TYPE = { icmp: 0, tcpReset: 1, icmpx: 2 };

/** A descriptor kept per op so kernel errors can be reported against the object that caused them. */
export interface OpDesc {
  op: OpName; kind: KindName; object: string; elements?: NftElement[];
  /** For element ops written with elementFrom(): names element i in an error report. */
  elementText?: (i: number) => string;
}

/**
 * A growable buffer of the batch's items, with the element encoder: the batch itself, and packed
 * element lists (ElementItems) that a renderer fills ahead of the batch and the batch then copies.
 */
class ItemWriter {
  protected buf: Buffer;
  protected dv: DataView;
  protected pos: number;
  private elemStart = 0;

  constructor(initialSize: number, start: number) {
    this.buf = Buffer.allocUnsafe(Math.max(initialSize, start));
    this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    this.pos = start;
  }

  protected ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const nb = Buffer.allocUnsafe(size);
    this.buf.copy(nb, 0, 0, this.pos);
    this.buf = nb;
    this.dv = new DataView(nb.buffer, nb.byteOffset, nb.byteLength);
  }

  protected item(tag: number, id: number, len: number): number {
    if (len > 0xffff) throw new Error('attribute too long');
    this.ensure(4 + len);
    this.buf[this.pos] = tag;
    this.buf[this.pos + 1] = id;
    this.dv.setUint16(this.pos + 2, len, true);
    this.pos += 4;
    const at = this.pos;
    this.pos += len;
    return at;
  }

  /** Appends one element to the current element op (netlink attributes written directly). */
  element(e: NftElement): void {
    this.writeElement(e.key, e.key.length, e.keyEnd, e.data, e.data?.length ?? 0, e.verdict, e.intervalEnd, e.timeout, e.comment);
  }

  /**
   * Appends one element from the first `keyLen` bytes of `key` and `dataLen` of `data` (map data) or a
   * verdict: the allocation-free form of element() for callers that reuse scratch buffers.
   */
  elementFrom(key: Uint8Array, keyLen: number, data: Uint8Array | undefined, dataLen: number, verdict?: NftVerdict): void {
    this.writeElement(key, keyLen, undefined, data, dataLen, verdict, undefined, undefined, undefined);
  }

  private writeElement(
    key: Uint8Array, keyLen: number, keyEnd: Uint8Array | undefined, data: Uint8Array | undefined, dataLen: number,
    v: NftVerdict | undefined, intervalEnd: boolean | undefined, timeout: number | undefined, commentText: string | undefined,
  ): void {
    const chain = v !== undefined && typeof v === 'object' ? this.chainBytes('jump' in v ? v.jump : v.goto) : undefined;
    const comment = commentText ? udataComment(0, commentText) : undefined;
    // upper bound of the encoded size
    const max = 64 + keyLen + (keyEnd?.length ?? 0) + dataLen + (chain?.length ?? 0) + (comment?.length ?? 0);
    const lenAt = this.item(TAG_ELEM, 0, 0) - 2; // the item length is patched below
    this.ensure(max);
    const start = this.pos;
    this.elemStart = start;
    this.value(1, key, keyLen); // NFTA_SET_ELEM_KEY
    if (keyEnd) this.value(10, keyEnd, keyEnd.length); // NFTA_SET_ELEM_KEY_END
    if (data) this.value(2, data, dataLen); // NFTA_SET_ELEM_DATA
    if (v !== undefined) {
      const vlen = 4 + 8 + (chain ? 4 + ((chain.length + 3) & ~3) : 0);
      this.nla(2 | 0x8000, 4 + vlen); // NFTA_SET_ELEM_DATA
      this.nla(2 | 0x8000, vlen); // NFTA_DATA_VERDICT
      this.nla(1, 8); // NFTA_VERDICT_CODE (be32)
      this.dv.setInt32(this.pos, verdictCode(v), false);
      this.pos += 4;
      if (chain) this.blob(2, chain, chain.length); // NFTA_VERDICT_CHAIN
    }
    if (intervalEnd) { this.nla(3, 8); this.dv.setUint32(this.pos, 1, false); this.pos += 4; } // NFTA_SET_ELEM_FLAGS
    if (timeout !== undefined) { // NFTA_SET_ELEM_TIMEOUT (be64 ms)
      this.nla(4, 12);
      this.dv.setBigUint64(this.pos, BigInt(timeout), false);
      this.pos += 8;
    }
    if (comment) this.blob(6, comment, comment.length); // NFTA_SET_ELEM_USERDATA
    this.dv.setUint16(lenAt, this.pos - start, true);
  }

  private chainCache = new Map<string, Uint8Array>();
  /** NUL-terminated chain name bytes, cached (verdict maps repeat the same few chains). */
  private chainBytes(name: string): Uint8Array {
    let b = this.chainCache.get(name);
    if (!b) {
      b = Buffer.from(name + '\0', 'utf8');
      if (this.chainCache.size > 4096) this.chainCache.clear();
      this.chainCache.set(name, b);
    }
    return b;
  }

  /** Netlink attribute header (host order), at this.pos (capacity ensured by the caller). */
  private nla(type: number, len: number): void {
    this.dv.setUint16(this.pos, len, true);
    this.dv.setUint16(this.pos + 2, type, true);
    this.pos += 4;
  }

  /** Attribute with the first `len` bytes of `bytes` as payload, padded to 4 bytes. */
  private blob(type: number, bytes: Uint8Array, len: number): void {
    this.nla(type, 4 + len);
    const buf = this.buf;
    let p = this.pos;
    // Element keys and data are a few bytes: a loop beats set() on a subarray view.
    for (let i = 0; i < len; i++) buf[p++] = bytes[i];
    while ((p - this.elemStart) & 3) buf[p++] = 0;
    this.pos = p;
  }

  /** Nested { NFTA_DATA_VALUE bytes } under `type` (KEY, KEY_END, DATA). */
  private value(type: number, bytes: Uint8Array, len: number): void {
    this.nla(type | 0x8000, 8 + ((len + 3) & ~3));
    this.blob(1, bytes, len);
  }

}

/** Builds the binary batch. Use `add(op)` for object ops, or `beginElements` + `element` for bulk elements. */
/**
 * Element items (tag ELEM) encoded ahead of a batch: a full sync packs each set's elements as the
 * services render, so ~1M element objects never outlive a young-generation GC. The batch copies
 * them into an element op with NftBatch.appendElements().
 */
export class ElementItems extends ItemWriter {
  constructor(initialSize = 4096) {
    super(initialSize, 0);
  }

  get byteLength(): number { return this.pos; }

  /** The bytes from `from` to `to` (a view: valid until the next element is written). */
  view(from = 0, to = this.pos): Buffer { return this.buf.subarray(from, to); }
}

export class NftBatch extends ItemWriter {
  private recStart = -1;
  private recKind = 0;
  readonly descs: OpDesc[] = [];
  private finished?: Buffer;
  private autoSetId = 0x40000000;

  constructor(initialSize = 1 << 16) {
    super(initialSize, 12);
  }

  get length(): number { return this.descs.length; }

  private begin(op: OpName, kind: KindName, family: NftFamily, desc: OpDesc): void {
    if (this.finished) throw new Error('NftBatch already finished');
    this.end();
    const fam = NFPROTO[family];
    if (fam === undefined) throw new Error(`unknown family ${family}`);
    this.ensure(8);
    this.buf[this.pos] = OP[op];
    this.buf[this.pos + 1] = KIND[kind];
    this.buf[this.pos + 2] = fam;
    this.buf[this.pos + 3] = 0;
    this.recStart = this.pos;
    this.recKind = KIND[kind];
    this.pos += 8;
    this.descs.push(desc);
  }

  private end(): void {
    if (this.recStart < 0) return;
    this.dv.setUint32(this.recStart + 4, this.pos - this.recStart - 8, true);
    this.recStart = -1;
  }

  private val(tag: number, id: number, w: W, v: number | string | Uint8Array): void {
    // item() may grow (replace) this.buf / this.dv: take the offset first, then the buffers.
    switch (w) {
      case 'u8': { const at = this.item(tag, id, 1); this.buf[at] = Number(v); break; }
      case 'u16': { const at = this.item(tag, id, 2); this.dv.setUint16(at, Number(v), true); break; }
      case 'u32': {
        const n = Number(v);
        const at = this.item(tag, id, 4);
        if (n < 0) this.dv.setInt32(at, n, true); else this.dv.setUint32(at, n, true);
        break;
      }
      case 'u64': { const at = this.item(tag, id, 8); this.dv.setBigUint64(at, BigInt(v as number), true); break; }
      case 'str': {
        const str = String(v);
        const n = Buffer.byteLength(str, 'utf8');
        const at = this.item(tag, id, n + 1);
        this.buf.write(str, at, n, 'utf8');
        this.buf[at + n] = 0;
        break;
      }
      case 'bytes': {
        const b = v as Uint8Array;
        const at = this.item(tag, id, b.length);
        this.buf.set(b, at);
        break;
      }
    }
  }

  private attr(id: number, w: W, v: number | string | Uint8Array | undefined): void {
    if (v !== undefined) this.val(TAG_ATTR, id, w, v);
  }

  /** Adds one op; returns its index (used in error reports). */
  add(o: NftOp): number {
    const idx = this.descs.length;
    if ('table' in o) this.table(o.op, o.table);
    else if ('chain' in o) this.chain(o.op, o.chain);
    else if ('set' in o) this.set(o.op, o.set);
    else if ('elements' in o) {
      this.beginElements(o.op, o.elements);
      this.descs[idx].elements = o.elements.elements;
      for (const e of o.elements.elements) this.element(e);
    } else if ('rule' in o) this.rule(o.op, o.rule);
    else if ('flowtable' in o) this.flowtable(o.op, o.flowtable);
    else throw new Error('unknown op');
    return idx;
  }

  table(op: NftOp['op'], t: NftTable): void {
    this.begin(op as OpName, 'table', t.family, { op: op as OpName, kind: 'table', object: `table ${t.family} ${t.name}` });
    this.attr(A.TABLE_NAME, 'str', t.name);
    if (t.dormant !== undefined) this.attr(A.TABLE_FLAGS, 'u32', t.dormant ? 1 : 0);
    if (t.comment) this.attr(A.TABLE_USERDATA, 'bytes', udataComment(0, t.comment));
  }

  chain(op: NftOp['op'], c: NftChain): void {
    this.begin(op as OpName, 'chain', c.family,
      { op: op as OpName, kind: 'chain', object: `chain ${c.family} ${c.table} ${c.name}` });
    this.attr(A.CHAIN_TABLE, 'str', c.table);
    this.attr(A.CHAIN_NAME, 'str', c.name);
    if (c.hook !== undefined && (op === 'add' || op === 'create')) {
      this.attr(A.CHAIN_HOOKNUM, 'u32', HOOK[c.hook]);
      this.attr(A.CHAIN_PRIO, 'u32', c.priority ?? 0);
      this.attr(A.CHAIN_TYPE, 'str', c.type ?? 'filter');
      if (c.policy) this.attr(A.CHAIN_POLICY, 'u32', c.policy === 'accept' ? 1 : 0);
      if (c.device) this.attr(A.CHAIN_DEV, 'str', c.device);
    }
    if (c.comment && (op === 'add' || op === 'create')) this.attr(A.CHAIN_USERDATA, 'bytes', udataComment(0, c.comment));
  }

  flowtable(op: NftOp['op'], f: NftFlowtable): void {
    this.begin(op as OpName, 'flowtable', f.family,
      { op: op as OpName, kind: 'flowtable', object: `flowtable ${f.family} ${f.table} ${f.name}` });
    this.attr(A.FLOWTABLE_TABLE, 'str', f.table);
    this.attr(A.FLOWTABLE_NAME, 'str', f.name);
    if (op !== 'add' && op !== 'create') return;
    // Flowtables hook ingress only; the kernel wants the hook (with its devices) on every add.
    this.attr(A.FLOWTABLE_HOOKNUM, 'u32', HOOK.ingress);
    this.attr(A.FLOWTABLE_PRIO, 'u32', f.priority ?? 0);
    if (f.counter) this.attr(A.FLOWTABLE_FLAGS, 'u32', 0x2); // NFT_FLOWTABLE_COUNTER
    for (const d of f.devices) this.attr(A.FLOWTABLE_DEVICES, 'str', d);
  }

  set(op: NftOp['op'], s: NftSet): void {
    this.begin(op as OpName, 'set', s.family, { op: op as OpName, kind: 'set', object: `set ${s.family} ${s.table} ${s.name}` });
    this.attr(A.SET_TABLE, 'str', s.table);
    this.attr(A.SET_NAME, 'str', s.name);
    if (op !== 'add' && op !== 'create') return;
    // The kernel requires a transaction-local id on every new set; auto ids stay clear of user ids.
    this.attr(A.SET_ID, 'u32', s.id ?? this.autoSetId++);
    const keys = Array.isArray(s.keyType) ? s.keyType : [s.keyType];
    let flags = 0;
    const f = s.flags ?? {};
    if (f.anonymous) flags |= SET_F.anonymous;
    if (f.constant) flags |= SET_F.constant;
    if (f.interval) flags |= SET_F.interval;
    if (f.timeout || s.timeout !== undefined) flags |= SET_F.timeout;
    if (f.dynamic) flags |= SET_F.dynamic;
    if (s.dataType !== undefined) flags |= SET_F.map;
    if (keys.length > 1 && f.interval) flags |= SET_F.concat;
    this.attr(A.SET_FLAGS, 'u32', flags);
    this.attr(A.SET_KEY_TYPE, 'u32', dataTypeId(keys));
    const keyLen = s.keyLen ?? dataTypeLen(keys);
    if (!keyLen) throw new Error(`set ${s.name}: keyLen required for key type ${keys.join(' . ')}`);
    this.attr(A.SET_KEY_LEN, 'u32', keyLen);
    if (flags & SET_F.concat) this.attr(A.SET_DESC_CONCAT, 'bytes', Uint8Array.from(keys.map((k) => NFT_DATATYPES[k].len)));
    if (s.dataType !== undefined) {
      const isVerdict = s.dataType === 'verdict';
      this.attr(A.SET_DATA_TYPE, 'u32', isVerdict ? 0xffffff00 : dataTypeId(s.dataType));
      const dl = isVerdict ? 0 : (s.dataLen ?? dataTypeLen(s.dataType));
      if (!isVerdict && !dl) throw new Error(`set ${s.name}: dataLen required`);
      this.attr(A.SET_DATA_LEN, 'u32', dl);
    }
    if (s.timeout !== undefined) this.attr(A.SET_TIMEOUT, 'u64', s.timeout);
    if (s.gcInterval !== undefined) this.attr(A.SET_GC_INTERVAL, 'u32', s.gcInterval);
    if (s.size !== undefined) this.attr(A.SET_DESC_SIZE, 'u32', s.size);
    if (s.policy) this.attr(A.SET_POLICY, 'u32', s.policy === 'memory' ? 1 : 0);
    // nft reads key byte order from the set's userdata; integer/mark keys are host-endian.
    const ud: number[] = [];
    const hostKey = keys.length === 1 && (keys[0] === 'integer' || keys[0] === 'mark');
    ud.push(0, 4, ...u32le(hostKey ? 1 : 2)); // NFTNL_UDATA_SET_KEYBYTEORDER: 1 host, 2 big endian
    if (s.dataType !== undefined && s.dataType !== 'verdict') {
      const dts = Array.isArray(s.dataType) ? s.dataType : [s.dataType];
      const hostData = dts.length === 1 && (dts[0] === 'integer' || dts[0] === 'mark');
      ud.push(1, 4, ...u32le(hostData ? 1 : 2)); // NFTNL_UDATA_SET_DATABYTEORDER
    }
    if (s.comment) ud.push(...udataComment(7, s.comment)); // NFTNL_UDATA_SET_COMMENT
    this.attr(A.SET_USERDATA, 'bytes', Uint8Array.from(ud));
  }

  /** Starts an element op; follow with `element()` calls (any number; the addon splits messages). */
  beginElements(op: NftOp['op'], e: Omit<NftElements, 'elements'>, elementText?: (i: number) => string): number {
    const idx = this.descs.length;
    this.begin(op as OpName, 'elements', e.family,
      { op: op as OpName, kind: 'elements', object: `set ${e.family} ${e.table} ${e.set}`, elementText });
    this.attr(A.SET_TABLE, 'str', e.table);
    if (e.set) this.attr(A.SET_NAME, 'str', e.set);
    if (e.setId !== undefined) this.attr(A.SET_ID, 'u32', e.setId);
    return idx;
  }

  /** Appends encoded elements (`items`' bytes from `from` to `to`, whole items) to the current element op. */
  appendElements(items: ElementItems, from: number, to: number): void {
    if (this.recStart < 0 || this.recKind !== KIND.elements) throw new Error('appendElements outside an element op');
    this.ensure(to - from);
    this.buf.set(items.view(from, to), this.pos);
    this.pos += to - from;
  }

  rule(op: NftOp['op'], r: NftRule): void {
    const what = `rule ${r.family} ${r.table} ${r.chain}` + (r.handle !== undefined ? ` handle ${r.handle}` : '') +
      (r.comment ? ` "${r.comment}"` : '');
    this.begin(op as OpName, 'rule', r.family, { op: op as OpName, kind: 'rule', object: what });
    this.attr(A.RULE_TABLE, 'str', r.table);
    this.attr(A.RULE_CHAIN, 'str', r.chain);
    if (r.handle !== undefined) this.attr(A.RULE_HANDLE, 'u64', r.handle);
    if (r.position !== undefined) this.attr(A.RULE_POSITION, 'u64', r.position);
    if (op === 'delete' || op === 'destroy') return;
    if (r.comment) this.attr(A.RULE_USERDATA, 'bytes', udataComment(0, r.comment));
    for (const x of r.exprs) this.expr(x);
  }

  private expr(x: NftExpr): void {
    const put = (name: string, fields: Record<string, number | string | Uint8Array | undefined>) => {
      const table = EXPR_ATTRS[name];
      const at = this.item(TAG_EXPR, 0, name.length);
      this.buf.write(name, at, name.length, 'latin1');
      for (const k in fields) {
        const v = fields[k];
        if (v === undefined) continue;
        const [id, w] = table[k];
        this.val(TAG_EXPR_ATTR, id, w, v);
      }
    };
    switch (x.type) {
      case 'payload': put('payload', { dreg: x.dreg, base: PAYLOAD_BASE[x.base], offset: x.offset, len: x.len }); break;
      case 'meta': put('meta', { key: META_KEY[x.key], dreg: x.dreg }); break;
      case 'metaSet': put('meta', { key: META_KEY[x.key], sreg: x.sreg }); break;
      case 'cmp': put('cmp', { sreg: x.sreg, op: CMP_OP[x.op], data: x.data }); break;
      case 'range': put('range', { sreg: x.sreg, op: CMP_OP[x.op], from: x.from, to: x.to }); break;
      case 'bitwise': put('bitwise', { sreg: x.sreg, dreg: x.dreg, len: x.len, mask: x.mask, xor: x.xor }); break;
      case 'lookup':
        put('lookup', { sreg: x.sreg, dreg: x.dreg, set: x.set, setId: x.setId, flags: x.invert ? 1 : undefined });
        break;
      case 'immediate': put('immediate', { dreg: x.dreg, data: x.data }); break;
      case 'verdict': {
        const chain = typeof x.verdict === 'object' ? vChain(x.verdict) : undefined;
        put('immediate', { dreg: 0, verdict: verdictCode(x.verdict), chain });
        break;
      }
      case 'numgen':
        put('numgen', { dreg: x.dreg, mod: x.mod, mode: x.mode === 'random' ? 1 : 0, offset: x.offset ?? 0 });
        break;
      case 'ct':
        put('ct', { dreg: x.dreg, key: CT_KEY[x.key], dir: x.dir === undefined ? undefined : x.dir === 'reply' ? 1 : 0 });
        break;
      case 'ctSet': put('ct', { sreg: x.sreg, key: CT_KEY[x.key] }); break;
      case 'nat':
        put('nat', {
          nat: x.nat === 'dnat' ? 1 : 0, family: NFPROTO[x.family], regAddrMin: x.regAddrMin, regAddrMax: x.regAddrMax,
          regProtoMin: x.regProtoMin, regProtoMax: x.regProtoMax, flags: natFlags(x.flags),
        });
        break;
      case 'masq':
        put('masq', { flags: natFlags(x.flags), regProtoMin: x.regProtoMin, regProtoMax: x.regProtoMax });
        break;
      case 'reject': put('reject', { reject: REJECT_TYPE[x.reject], code: x.code ?? 0 }); break;
      case 'counter': put('counter', { packets: x.packets ?? 0, bytes: x.bytes ?? 0 }); break;
      case 'dynset':
        put('dynset', {
          sregKey: x.sregKey, sregData: x.sregData, op: { add: 0, update: 1, delete: 2 }[x.op], timeout: x.timeout,
          set: x.set, setId: x.setId,
        });
        break;
      case 'fib':
        put('fib', { dreg: x.dreg, result: FIB_RESULT[x.result], flags: x.flags.reduce((a, f) => a | FIB_F[f], 0) });
        break;
      case 'log':
        put('log', { prefix: x.prefix, group: x.group, snaplen: x.snaplen, qthreshold: x.qthreshold, level: x.level });
        break;
      case 'limit':
        put('limit', {
          rate: x.rate, unit: LIMIT_UNIT[x.unit], burst: x.burst ?? 0, type: x.bytes ? 1 : 0, flags: x.invert ? 1 : 0,
        });
        break;
      case 'notrack': put('notrack', {}); break;
      case 'byteorder':
        put('byteorder', { dreg: x.dreg, sreg: x.sreg, op: x.op === 'hton' ? 1 : 0, len: x.len, size: x.size });
        break;
      case 'flowOffload': put('flow_offload', { table: x.flowtable }); break;
      default: throw new Error(`unknown expression ${(x as { type: string }).type}`);
    }
  }

  /** Closes the batch; the returned Buffer is what the addon reads. */
  finish(): Buffer {
    if (this.finished) return this.finished;
    this.end();
    this.dv.setUint32(0, 0x42504e4b, true); // "KNPB" read as LE u32 'KPNB'
    this.dv.setUint32(4, 1, true);
    this.dv.setUint32(8, this.descs.length, true);
    this.finished = this.buf.subarray(0, this.pos);
    return this.finished;
  }
}

function vChain(v: { jump: string } | { goto: string }): string {
  return 'jump' in v ? v.jump : v.goto;
}

export function verdictCode(v: NftVerdict): number {
  if (typeof v === 'string') return VERDICT[v];
  return 'jump' in v ? VERDICT.jump : VERDICT.goto;
}

function natFlags(f?: { random?: boolean; fullyRandom?: boolean; persistent?: boolean }): number | undefined {
  if (!f) return undefined;
  let n = 0;
  for (const k of Object.keys(NAT_F) as (keyof typeof NAT_F)[]) if (f[k]) n |= NAT_F[k];
  return n;
}

function u32le(v: number): number[] {
  return [v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >>> 24) & 0xff];
}

/** libnftnl userdata TLV with one NUL-terminated comment (max 127 chars, as nft). */
export function udataComment(type: number, comment: string): Uint8Array {
  const s = Buffer.from(comment, 'utf8').subarray(0, 127);
  const out = new Uint8Array(2 + s.length + 1);
  out[0] = type;
  out[1] = s.length + 1;
  out.set(s, 2);
  return out;
}

/** Encodes a list of ops. */
export function encodeOps(ops: NftOp[] | NftBatch): NftBatch {
  if (ops instanceof NftBatch) return ops;
  // Sized for the ops (it doubles when short): a small batch does not hold 64 KiB outside the heap.
  const b = new NftBatch(Math.min(1 << 16, Math.max(4096, ops.length * 256)));
  for (const o of ops) b.add(o);
  return b;
}

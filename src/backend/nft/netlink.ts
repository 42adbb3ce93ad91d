// Render the backend's ops as NftOp[] for the native addon (one atomic netlink batch).
import {
  CT_STATE, IPPROTO, NFT_REG_1, NFT_REG_2, NFT_REG32, RTN, concat, ipAddr, port as portBytes, proto as protoByte, u32host, writeAddr,
  type NftExpr, type NftOp, type NftSet, type NftElement, type NftVerdict, type NftDataType,
} from '../../native/nft-types';
import type { ElementItems, NftBatch } from '../../native/encode';
import { elemChunks, MASQ_BIT, N, type Elem, type Fam, type L4, type Op, type SetSpec, type Stmt, type Verd } from './types';

const IPS_DST_NAT = 0x20;

interface Ctx { fam: Fam; table: string }

const addrLen = (fam: Fam): number => (fam === 'ip' ? 4 : 16);
const saddrOff = (fam: Fam): number => (fam === 'ip' ? 12 : 8);
const daddrOff = (fam: Fam): number => (fam === 'ip' ? 16 : 24);
const addrType = (fam: Fam): NftDataType => (fam === 'ip' ? 'ipv4_addr' : 'ipv6_addr');
/** The 4-byte register right after an address loaded into NFT_REG_1. */
const afterAddr = (fam: Fam, k = 0): number => NFT_REG32((fam === 'ip' ? 1 : 4) + k);

const saddr = (fam: Fam, dreg = NFT_REG_1): NftExpr => ({ type: 'payload', base: 'network', offset: saddrOff(fam), len: addrLen(fam), dreg });
const daddr = (fam: Fam, dreg = NFT_REG_1): NftExpr => ({ type: 'payload', base: 'network', offset: daddrOff(fam), len: addrLen(fam), dreg });
const dport = (dreg: number): NftExpr => ({ type: 'payload', base: 'transport', offset: 2, len: 2, dreg });
const l4proto = (dreg: number): NftExpr => ({ type: 'meta', key: 'l4proto', dreg });
const verdict = (v: NftVerdict): NftExpr => ({ type: 'verdict', verdict: v });

function ctNew(): NftExpr[] {
  return [
    { type: 'ct', key: 'state', dreg: NFT_REG_1 },
    { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(CT_STATE.new), xor: u32host(0) },
    { type: 'cmp', sreg: NFT_REG_1, op: 'neq', data: u32host(0) },
  ];
}

/** ct status & dnat != 0 (or == 0 with `none`). */
function ctDnat(none = false): NftExpr[] {
  return [
    { type: 'ct', key: 'status', dreg: NFT_REG_1 },
    { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(IPS_DST_NAT), xor: u32host(0) },
    { type: 'cmp', sreg: NFT_REG_1, op: none ? 'eq' : 'neq', data: u32host(0) },
  ];
}

/** The first byte of an IPv4 address (saddr or daddr) is (or is not) 127: inside 127.0.0.0/8. */
function inLoopbackNet(which: 'saddr' | 'daddr', eq: boolean): NftExpr[] {
  return [
    { type: 'payload', base: 'network', offset: which === 'saddr' ? saddrOff('ip') : daddrOff('ip'), len: 1, dreg: NFT_REG_1 },
    { type: 'cmp', sreg: NFT_REG_1, op: eq ? 'eq' : 'neq', data: new Uint8Array([127]) },
  ];
}

function orMark(): NftExpr[] {
  return [
    { type: 'meta', key: 'mark', dreg: NFT_REG_1 },
    { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(~MASQ_BIT), xor: u32host(MASQ_BIT) },
    { type: 'metaSet', key: 'mark', sreg: NFT_REG_1 },
  ];
}

/** Network address and mask bytes of a CIDR. */
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

/** Loads an address with `load` into NFT_REG_1 and compares it with a CIDR (nothing for a /0). */
function cidrMatch(load: NftExpr, cidr: string): NftExpr[] {
  const { net, mask } = cidrBytes(cidr);
  if (mask.every((b) => b === 0)) return [];
  return [
    load,
    { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: net.length, mask, xor: new Uint8Array(net.length) },
    { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: net },
  ];
}

/** IFNAMSIZ: the kernel's interface name field, NUL padded. */
const IFNAMSIZ = 16;

/**
 * `iifname NAME` / `iifname "PREFIX*"`: the incoming interface's name (all NULs for a locally generated
 * packet) compared whole (the name and its NUL padding) or on the prefix's bytes only, as nft does.
 */
export function iifMatch(name: string, prefix: boolean): NftExpr[] {
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length === 0 || bytes.length >= IFNAMSIZ) throw new Error(`iifname ${JSON.stringify(name)}: an interface name has 1 to ${IFNAMSIZ - 1} bytes`);
  const data = new Uint8Array(prefix ? bytes.length : IFNAMSIZ);
  data.set(bytes);
  return [{ type: 'meta', key: 'iifname', dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data }];
}

function protoEq(p: 'tcp' | 'udp' | 'sctp'): NftExpr[] {
  return [l4proto(NFT_REG_1), { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: protoByte(p) }];
}

export function stmtExprs(fam: Fam, st: Stmt): NftExpr[] {
  switch (st.s) {
    case 'vmapVip':
      return [
        ...(st.ctNew ? ctNew() : []),
        daddr(fam), l4proto(afterAddr(fam)), dport(afterAddr(fam, 1)),
        { type: 'lookup', sreg: NFT_REG_1, set: st.map, dreg: 0 },
      ];
    case 'vmapPort': {
      const out: NftExpr[] = st.ctNew ? ctNew() : [];
      if (st.local) {
        out.push({ type: 'fib', flags: ['daddr'], result: 'addrtype', dreg: NFT_REG_1 });
        out.push({ type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: u32host(RTN.local) });
      }
      if (st.daddrCidr) out.push(...cidrMatch(daddr(fam), st.daddrCidr));
      if (st.local && (!st.daddrCidr || st.exceptLoopback)) {
        if (fam === 'ip') {
          out.push({ type: 'payload', base: 'network', offset: daddrOff(fam), len: 1, dreg: NFT_REG_1 });
          out.push({ type: 'cmp', sreg: NFT_REG_1, op: 'neq', data: new Uint8Array([127]) });
        } else {
          out.push(daddr(fam));
          out.push({ type: 'cmp', sreg: NFT_REG_1, op: 'neq', data: ipAddr('::1') });
        }
      }
      out.push(l4proto(NFT_REG_1), dport(NFT_REG32(1)), { type: 'lookup', sreg: NFT_REG_1, set: st.map, dreg: 0 });
      return out;
    }
    case 'jump': return [verdict({ jump: st.chain })];
    case 'goto': return [verdict({ goto: st.chain })];
    case 'srcCidr':
      return [...cidrMatch(saddr(fam), st.cidr), verdict(st.then === 'return' ? 'return' : { goto: st.then.goto })];
    case 'iifReturn':
      return [...iifMatch(st.iifname, st.prefix), verdict('return')];
    case 'classGoto': {
      const out: NftExpr[] = [];
      if (st.from === 'local') {
        out.push({ type: 'fib', flags: ['saddr'], result: 'addrtype', dreg: NFT_REG_1 }, { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: u32host(RTN.local) });
      } else if (st.from !== 'any') out.push(...('cidr' in st.from ? cidrMatch(saddr(fam), st.from.cidr) : iifMatch(st.from.iifname, st.from.prefix)));
      if (st.masq) out.push(...orMark());
      out.push(verdict({ goto: st.chain }));
      return out;
    }
    case 'rejectDaddrInSet':
      return [...ctNew(), daddr(fam), { type: 'lookup', sreg: NFT_REG_1, set: st.set }, { type: 'reject', reject: 'icmp', code: fam === 'ip' ? 3 : 4 }];
    case 'dnatPick': {
      // Key registers: [daddr .] l4proto . dport . slot, each field in its own 4-byte register(s).
      const out: NftExpr[] = [...protoEq(st.proto)];
      let r = 0;
      if (st.key === 'vip') { out.push(daddr(fam)); r = fam === 'ip' ? 1 : 4; }
      out.push(l4proto(NFT_REG32(r)), dport(NFT_REG32(r + 1)));
      out.push({ type: 'numgen', mode: 'random', mod: st.n, offset: 0, dreg: NFT_REG32(r + 2) });
      out.push({ type: 'lookup', sreg: NFT_REG_1, set: st.map, dreg: NFT_REG_1 });
      out.push({ type: 'nat', nat: 'dnat', family: fam, regAddrMin: NFT_REG_1, regProtoMin: fam === 'ip' ? NFT_REG32(1) : NFT_REG_2 });
      return out;
    }
    case 'dnat':
      return [
        ...protoEq(st.proto),
        { type: 'immediate', dreg: NFT_REG_1, data: ipAddr(st.addr) },
        { type: 'immediate', dreg: NFT_REG_2, data: portBytes(st.port) },
        { type: 'nat', nat: 'dnat', family: fam, regAddrMin: NFT_REG_1, regProtoMin: NFT_REG_2 },
      ];
    case 'affinityGoto':
      return [saddr(fam), { type: 'lookup', sreg: NFT_REG_1, set: st.set }, verdict({ goto: st.chain })];
    case 'randomGoto':
      return [
        { type: 'numgen', mode: 'random', mod: st.mod, offset: 0, dreg: NFT_REG_1 },
        { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: u32host(0) },
        verdict({ goto: st.chain }),
      ];
    case 'affinityUpdate':
      return [saddr(fam), { type: 'dynset', op: 'update', set: st.set, sregKey: NFT_REG_1 }];
    case 'drop': return [verdict('drop')];
    case 'rejectTcp':
      return [l4proto(NFT_REG_1), { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: protoByte(IPPROTO.tcp) }, { type: 'reject', reject: 'tcpReset' }];
    case 'rejectIcmp':
      // ICMP port unreachable is code 3; ICMPv6 port unreachable is code 4.
      return [{ type: 'reject', reject: 'icmp', code: fam === 'ip' ? 3 : 4 }];
    case 'localnetMasq':
      if (fam !== 'ip') throw new Error('localnetMasq: IPv4 only');
      return [...ctDnat(), ...inLoopbackNet('saddr', true), { type: 'masq', flags: { fullyRandom: true } }];
    case 'dropLocalnet':
      if (fam !== 'ip') throw new Error('dropLocalnet: IPv4 only');
      return [
        ...inLoopbackNet('daddr', true), ...inLoopbackNet('saddr', false),
        { type: 'ct', key: 'state', dreg: NFT_REG_1 },
        { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(CT_STATE.established | CT_STATE.related), xor: u32host(0) },
        { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: u32host(0) },
        ...ctDnat(true),
        verdict('drop'),
      ];
    case 'hairpinMasq':
      return [
        ...ctDnat(),
        saddr(fam), daddr(fam, fam === 'ip' ? NFT_REG32(1) : NFT_REG_2),
        { type: 'lookup', sreg: NFT_REG_1, set: N.hairpin },
        { type: 'masq' },
      ];
    case 'returnIfNoMark':
      return [
        { type: 'meta', key: 'mark', dreg: NFT_REG_1 },
        { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(MASQ_BIT), xor: u32host(0) },
        { type: 'cmp', sreg: NFT_REG_1, op: 'eq', data: u32host(0) },
        verdict('return'),
      ];
    case 'clearMark':
      return [
        { type: 'meta', key: 'mark', dreg: NFT_REG_1 },
        { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(0xffffffff), xor: u32host(MASQ_BIT) },
        { type: 'metaSet', key: 'mark', sreg: NFT_REG_1 },
      ];
    case 'masquerade':
      return [{ type: 'masq', flags: { fullyRandom: true } }];
    case 'flowOffload': {
      // ct packets is a host-order u64: swapped to network order so that cmp (a memcmp) orders it.
      const min = new Uint8Array(8);
      new DataView(min.buffer).setBigUint64(0, BigInt(st.minPackets), false);
      const threshold: NftExpr[] = st.minPackets > 0 ? [
        { type: 'ct', key: 'packets', dreg: NFT_REG_1 },
        { type: 'byteorder', op: 'hton', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 8, size: 8 },
        { type: 'cmp', sreg: NFT_REG_1, op: 'gt', data: min },
      ] : [];
      return [...ctDnat(), ...threshold, { type: 'flowOffload', flowtable: st.flowtable }];
    }
  }
}

function setObject(c: Ctx, spec: SetSpec): NftSet {
  const base = { family: c.fam, table: c.table, name: spec.name, ...(spec.size !== undefined && spec.kind !== 'affinity' ? { size: spec.size } : {}) };
  const a = addrType(c.fam);
  switch (spec.kind) {
    case 'vipMap': return { ...base, keyType: [a, 'inet_proto', 'inet_service'], dataType: 'verdict' };
    case 'portMap': return { ...base, keyType: ['inet_proto', 'inet_service'], dataType: 'verdict' };
    // The slot field is a 4-byte host-order integer (numgen's output); 'mark' is a 4-byte type.
    case 'pickVipMap': return { ...base, keyType: [a, 'inet_proto', 'inet_service', 'mark'], dataType: [a, 'inet_service'] };
    case 'pickPortMap': return { ...base, keyType: ['inet_proto', 'inet_service', 'mark'], dataType: [a, 'inet_service'] };
    case 'pairSet': return { ...base, keyType: [a, a] };
    case 'addrSet': return { ...base, keyType: a };
    // No size: the kernel takes it as the hash's initial bucket count too, and a set of 65535 zeroes
    // 1 MiB at creation (4 ms of kernel time per endpoint of an affinity Service); unsized, it starts
    // small and grows with the clients it sees, as upstream's sets do.
    case 'affinity':
      return { ...base, keyType: a, flags: { timeout: true, dynamic: true }, timeout: (spec.timeoutSec ?? 10800) * 1000 };
  }
}

const verd = (v: Verd): NftVerdict => (v === 'drop' ? 'drop' : { goto: v.goto });

export function elemObject(e: Elem): NftElement {
  switch (e.t) {
    case 'vip': return { key: concat(ipAddr(e.addr), protoByte(e.proto), portBytes(e.port)), verdict: verd(e.v) };
    case 'port': return { key: concat(protoByte(e.proto), portBytes(e.port)), verdict: verd(e.v) };
    case 'pick': return {
      key: e.addr !== undefined ? concat(ipAddr(e.addr), protoByte(e.proto), portBytes(e.port), u32host(e.i)) : concat(protoByte(e.proto), portBytes(e.port), u32host(e.i)),
      data: concat(ipAddr(e.epAddr), portBytes(e.epPort)),
    };
    case 'pair': return { key: concat(ipAddr(e.addr), ipAddr(e.addr)) };
    case 'addr': return { key: ipAddr(e.addr) };
  }
}

/** NftOps for one family's ops. */
export function toNftOps(fam: Fam, table: string, ops: Op[]): NftOp[] {
  const c: Ctx = { fam, table };
  const t = { family: fam, table };
  const out: NftOp[] = [];
  for (const op of ops) {
    switch (op.k) {
      case 'resetTable':
        out.push({ op: 'add', table: { family: fam, name: table } });
        out.push({ op: 'delete', table: { family: fam, name: table } });
        out.push({ op: 'add', table: { family: fam, name: table, comment: 'kpng service proxy' } });
        break;
      case 'addTable': out.push({ op: 'add', table: { family: fam, name: table, comment: 'kpng service proxy' } }); break;
      case 'addSet': out.push({ op: 'add', set: setObject(c, op.set) }); break;
      case 'flushSet': out.push({ op: 'flush', set: { ...t, name: op.name, keyType: 'integer' } }); break;
      case 'delSet': out.push({ op: 'delete', set: { ...t, name: op.name, keyType: 'integer' } }); break;
      case 'addChain': {
        const h = op.chain.hook;
        out.push({ op: 'add', chain: { ...t, name: op.chain.name, ...(h ? { hook: h.hook, type: h.type, priority: h.priority, policy: 'accept' as const } : {}) } });
        break;
      }
      case 'addFlowtable': out.push({ op: 'add', flowtable: { ...t, name: op.flowtable.name, devices: op.flowtable.devices } }); break;
      case 'delFlowtable': out.push({ op: 'delete', flowtable: { ...t, name: op.name, devices: [] } }); break;
      case 'flushChain': out.push({ op: 'flush', chain: { ...t, name: op.name } }); break;
      case 'delChain': out.push({ op: 'delete', chain: { ...t, name: op.name } }); break;
      case 'addRule': out.push({ op: 'add', rule: { ...t, chain: op.chain, exprs: stmtExprs(fam, op.stmt) } }); break;
      case 'addElems': out.push({ op: 'add', elements: { ...t, set: op.set, elements: op.elems.map(elemObject) } }); break;
      case 'delElems': out.push({ op: 'delete', elements: { ...t, set: op.set, elements: op.elems.map(elemObject) } }); break;
      case 'addPacked': {
        // One op per chunk, as the batch sends them.
        for (const c of elemChunks(op.elems.decode())) out.push({ op: 'add', elements: { ...t, set: op.set, elements: c.map(elemObject) } });
        break;
      }
    }
  }
  return out;
}

/**
 * Writes Elems straight into a batch: the same bytes as elemObject() + NftBatch.element(), without
 * the per-element Uint8Arrays and objects (a 50k-service full sync has ~1M elements).
 */
export class ElemWriter {
  private readonly key = new Uint8Array(64);
  private readonly data = new Uint8Array(32);
  private readonly verdicts = new Map<string, NftVerdict>();
  /** The address at the start of `key` (kept between pick elements). */
  private keyAddr: string | undefined;
  private keyAddrLen = 0;

  /** One element op (add or delete) of `elems` in `set`. */
  write(batch: NftBatch, fam: Fam, table: string, op: 'add' | 'delete', set: string, elems: Elem[]): void {
    batch.beginElements(op, { family: fam, table, set }, (i) => (elems[i] ? elemText(elems[i]) : `#${i}`));
    for (const e of elems) this.put(batch, e);
  }

  /** Writes one element into the current element op of `batch`, or into packed element items. */
  put(batch: NftBatch | ElementItems, e: Elem): void {
    const k = this.key, d = this.data;
    switch (e.t) {
      case 'vip': {
        this.keyAddr = undefined;
        let o = writeAddr(k, 0, e.addr);
        o = putProto(k, o, e.proto);
        o = putPort(k, o, e.port);
        batch.elementFrom(k, o, undefined, 0, this.verdict(e.v));
        return;
      }
      case 'port': {
        this.keyAddr = undefined;
        const o = putPort(k, putProto(k, 0, e.proto), e.port);
        batch.elementFrom(k, o, undefined, 0, this.verdict(e.v));
        return;
      }
      case 'pick': {
        // A destination's slots follow each other: its address is in the key already.
        let o = 0;
        if (e.addr !== undefined) {
          if (e.addr === this.keyAddr) o = this.keyAddrLen;
          else { o = writeAddr(k, 0, e.addr); this.keyAddr = e.addr; this.keyAddrLen = o; }
        } else this.keyAddr = undefined;
        o = putPort(k, putProto(k, o, e.proto), e.port);
        putU32host(k, o, e.i);
        batch.elementFrom(k, o + 4, d, putPort(d, writeAddr(d, 0, e.epAddr), e.epPort));
        return;
      }
      case 'pair': {
        this.keyAddr = undefined;
        batch.elementFrom(k, writeAddr(k, writeAddr(k, 0, e.addr), e.addr), undefined, 0);
        return;
      }
      case 'addr':
        this.keyAddr = undefined;
        batch.elementFrom(k, writeAddr(k, 0, e.addr), undefined, 0);
        return;
    }
  }

  /** The NftVerdict of a Verd, one object per chain (elements of a map share a few chains). */
  private verdict(v: Verd): NftVerdict {
    if (v === 'drop') return 'drop';
    let out = this.verdicts.get(v.goto);
    if (!out) {
      if (this.verdicts.size > 4096) this.verdicts.clear();
      out = { goto: v.goto };
      this.verdicts.set(v.goto, out);
    }
    return out;
  }
}

/** How an element is named in an error report. */
export function elemText(e: Elem): string {
  switch (e.t) {
    case 'vip': return `${e.addr} . ${e.proto} . ${e.port}`;
    case 'port': return `${e.proto} . ${e.port}`;
    case 'pick': return `${e.addr !== undefined ? `${e.addr} . ` : ''}${e.proto} . ${e.port} . ${e.i} : ${e.epAddr} . ${e.epPort}`;
    case 'pair': return `${e.addr} . ${e.addr}`;
    case 'addr': return e.addr;
  }
}

// Concatenated key fields, each padded to 4 bytes (as concat()); each returns the next offset
// (addresses: writeAddr).
function putProto(b: Uint8Array, o: number, p: L4): number {
  b[o] = IPPROTO[p]; b[o + 1] = 0; b[o + 2] = 0; b[o + 3] = 0;
  return o + 4;
}
function putPort(b: Uint8Array, o: number, p: number): number {
  b[o] = (p >> 8) & 0xff; b[o + 1] = p & 0xff; b[o + 2] = 0; b[o + 3] = 0;
  return o + 4;
}
function putU32host(b: Uint8Array, o: number, v: number): void {
  // Little-endian hosts only (the addon refuses others), as u32host().
  b[o] = v & 0xff; b[o + 1] = (v >>> 8) & 0xff; b[o + 2] = (v >>> 16) & 0xff; b[o + 3] = (v >>> 24) & 0xff;
}

// Render the backend's ops as NftOp[] for the native addon (one atomic netlink batch). Rule expressions
// come from the builders of src/native/nft-expr.ts; stmtExprs() runs once per rule of a full sync, so it
// calls the single-expression builders inline and spreads only the matches (arrays) it spread before:
// the same objects as hand-written literals, no extra array per rule.
import {
  CT_STATE, IPPROTO, NFT_REG_1, NFT_REG_2, NFT_REG32, RTN, concat, ipAddr, port as portBytes, proto as protoByte, u32host, writeAddr,
  type NftExpr, type NftOp, type NftSet, type NftElement, type NftVerdict,
} from '../../native/nft-types';
import { CT_STATUS_DNAT, addrType, expr, regAfterAddr } from '../../native/nft-expr';
import type { ElementItems, NftBatch } from '../../native/encode';
import { elemChunks, MASQ_BIT, SHARED_NAMES, type Elem, type IpFamily, type L4, type Op, type SetSpec, type Stmt, type Verdict } from './types';

interface Ctx { fam: IpFamily; table: string }

/** The first byte of an IPv4 address (saddr or daddr) is (or is not) 127: inside 127.0.0.0/8. */
function inLoopbackNet(which: 'saddr' | 'daddr', eq: boolean): NftExpr[] {
  return [expr.addrPrefix('ip', which, 1), expr.cmp(NFT_REG_1, eq ? 'eq' : 'neq', new Uint8Array([127]))];
}

export function stmtExprs(fam: IpFamily, st: Stmt): NftExpr[] {
  switch (st.type) {
    case 'vmapVip':
      return [
        ...(st.ctNew ? expr.ctNew() : []),
        expr.daddr(fam), expr.l4proto(regAfterAddr(fam)), expr.thDport(regAfterAddr(fam, 1)), expr.vmap(NFT_REG_1, st.map),
      ];
    case 'vmapPort': {
      const out: NftExpr[] = st.ctNew ? expr.ctNew() : [];
      if (st.local) out.push(...expr.fibLocal('daddr'));
      if (st.daddrCidr) out.push(...expr.cidrMatch(expr.daddr(fam), st.daddrCidr));
      if (st.local && (!st.daddrCidr || st.exceptLoopback)) {
        if (fam === 'ip') out.push(expr.addrPrefix('ip', 'daddr', 1), expr.neq(NFT_REG_1, new Uint8Array([127])));
        else out.push(expr.daddr(fam), expr.neq(NFT_REG_1, ipAddr('::1')));
      }
      out.push(expr.l4proto(NFT_REG_1), expr.thDport(NFT_REG32(1)), expr.vmap(NFT_REG_1, st.map));
      return out;
    }
    case 'jump': return [expr.jump(st.chain)];
    case 'goto': return [expr.goto(st.chain)];
    case 'srcCidr':
      return [...expr.cidrMatch(expr.saddr(fam), st.cidr), st.then === 'return' ? expr.ret() : expr.goto(st.then.goto)];
    case 'iifReturn':
      return [...expr.iifnameMatch(st.iifname, st.prefix), expr.ret()];
    case 'classGoto': {
      const out: NftExpr[] = [];
      // One rule per client class of a service: the single builders inline, not the fibLocal array.
      if (st.from === 'local') out.push(expr.fibAddrType('saddr', NFT_REG_1), expr.eq(NFT_REG_1, u32host(RTN.local)));
      else if (st.from !== 'any') {
        out.push(...('cidr' in st.from ? expr.cidrMatch(expr.saddr(fam), st.from.cidr) : expr.iifnameMatch(st.from.iifname, st.from.prefix)));
      }
      if (st.masq) out.push(...expr.setMetaMarkBits(MASQ_BIT));
      out.push(expr.goto(st.chain));
      return out;
    }
    case 'rejectDaddrInSet':
      return [...expr.ctNew(), expr.daddr(fam), expr.inSet(NFT_REG_1, st.set), expr.rejectPortUnreachable(fam)];
    case 'dnatPick': {
      // Key registers: [daddr .] l4proto . dport . slot, each field in its own 4-byte register(s).
      const out: NftExpr[] = expr.protoIs(st.proto);
      let r = 0;
      if (st.key === 'vip') { out.push(expr.daddr(fam)); r = fam === 'ip' ? 1 : 4; }
      out.push(expr.l4proto(NFT_REG32(r)), expr.thDport(NFT_REG32(r + 1)));
      out.push(expr.numgenRandom(st.n, NFT_REG32(r + 2)));
      out.push(expr.mapLookup(NFT_REG_1, st.map, NFT_REG_1));
      out.push(expr.dnat(fam, NFT_REG_1, fam === 'ip' ? NFT_REG32(1) : NFT_REG_2));
      return out;
    }
    case 'dnat':
      return [
        ...expr.protoIs(st.proto),
        expr.immediate(NFT_REG_1, ipAddr(st.addr)), expr.immediate(NFT_REG_2, portBytes(st.port)), expr.dnat(fam, NFT_REG_1, NFT_REG_2),
      ];
    case 'affinityGoto':
      return [expr.saddr(fam), expr.inSet(NFT_REG_1, st.set), expr.goto(st.chain)];
    case 'randomGoto':
      return [expr.numgenRandom(st.mod, NFT_REG_1), expr.eq(NFT_REG_1, u32host(0)), expr.goto(st.chain)];
    case 'affinityUpdate':
      return [expr.saddr(fam), expr.updateSet(st.set, NFT_REG_1)];
    case 'drop': return [expr.drop()];
    case 'rejectTcp':
      return [...expr.protoIs(IPPROTO.tcp), expr.tcpReset()];
    case 'rejectIcmp':
      return [expr.rejectPortUnreachable(fam)];
    case 'localnetMasq':
      if (fam !== 'ip') throw new Error('localnetMasq: IPv4 only');
      return [...expr.hasCtStatus(CT_STATUS_DNAT), ...inLoopbackNet('saddr', true), expr.masquerade(true)];
    case 'dropLocalnet':
      if (fam !== 'ip') throw new Error('dropLocalnet: IPv4 only');
      return [
        ...inLoopbackNet('daddr', true), ...inLoopbackNet('saddr', false),
        ...expr.lacksCtState(CT_STATE.established | CT_STATE.related), ...expr.lacksCtStatus(CT_STATUS_DNAT),
        expr.drop(),
      ];
    case 'hairpinMasq':
      return [
        ...expr.hasCtStatus(CT_STATUS_DNAT),
        expr.saddr(fam), expr.daddr(fam, fam === 'ip' ? NFT_REG32(1) : NFT_REG_2), expr.inSet(NFT_REG_1, SHARED_NAMES.hairpin), expr.masquerade(),
      ];
    case 'returnIfNoMark':
      return [...expr.lacksMetaMark(MASQ_BIT), expr.ret()];
    case 'clearMark':
      return expr.toggleMetaMarkBits(MASQ_BIT);
    case 'masquerade':
      return [expr.masquerade(true)];
    case 'flowOffload': {
      // ct packets is a host-order u64: swapped to network order so that cmp (a memcmp) orders it.
      const min = new Uint8Array(8);
      new DataView(min.buffer).setBigUint64(0, BigInt(st.minPackets), false);
      const threshold: NftExpr[] = st.minPackets > 0
        ? [expr.ct('packets', NFT_REG_1), expr.hton(NFT_REG_1, 8, 8), expr.cmp(NFT_REG_1, 'gt', min)]
        : [];
      return [...expr.hasCtStatus(CT_STATUS_DNAT), ...threshold, expr.flowOffload(st.flowtable)];
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

const verd = (v: Verdict): NftVerdict => (v === 'drop' ? 'drop' : { goto: v.goto });

export function elemObject(e: Elem): NftElement {
  switch (e.type) {
    case 'vip': return { key: concat(ipAddr(e.addr), protoByte(e.proto), portBytes(e.port)), verdict: verd(e.verdict) };
    case 'port': return { key: concat(protoByte(e.proto), portBytes(e.port)), verdict: verd(e.verdict) };
    case 'pick': return {
      key: e.addr !== undefined ? concat(ipAddr(e.addr), protoByte(e.proto), portBytes(e.port), u32host(e.slot)) : concat(protoByte(e.proto), portBytes(e.port), u32host(e.slot)),
      data: concat(ipAddr(e.epAddr), portBytes(e.epPort)),
    };
    case 'pair': return { key: concat(ipAddr(e.addr), ipAddr(e.addr)) };
    case 'addr': return { key: ipAddr(e.addr) };
  }
}

/** NftOps for one family's ops. */
export function toNftOps(fam: IpFamily, table: string, ops: Op[]): NftOp[] {
  const c: Ctx = { fam, table };
  const t = { family: fam, table };
  const out: NftOp[] = [];
  for (const op of ops) {
    switch (op.kind) {
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
  write(batch: NftBatch, fam: IpFamily, table: string, op: 'add' | 'delete', set: string, elems: Elem[]): void {
    batch.beginElements(op, { family: fam, table, set }, (i) => (elems[i] ? elemText(elems[i]) : `#${i}`));
    for (const e of elems) this.put(batch, e);
  }

  /** Writes one element into the current element op of `batch`, or into packed element items. */
  put(batch: NftBatch | ElementItems, e: Elem): void {
    const k = this.key, d = this.data;
    switch (e.type) {
      case 'vip': {
        this.keyAddr = undefined;
        let o = writeAddr(k, 0, e.addr);
        o = putProto(k, o, e.proto);
        o = putPort(k, o, e.port);
        batch.elementFrom(k, o, undefined, 0, this.verdict(e.verdict));
        return;
      }
      case 'port': {
        this.keyAddr = undefined;
        const o = putPort(k, putProto(k, 0, e.proto), e.port);
        batch.elementFrom(k, o, undefined, 0, this.verdict(e.verdict));
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
        putU32host(k, o, e.slot);
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

  /** The NftVerdict of a Verdict, one object per chain (elements of a map share a few chains). */
  private verdict(v: Verdict): NftVerdict {
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
  switch (e.type) {
    case 'vip': return `${e.addr} . ${e.proto} . ${e.port}`;
    case 'port': return `${e.proto} . ${e.port}`;
    case 'pick': return `${e.addr !== undefined ? `${e.addr} . ` : ''}${e.proto} . ${e.port} . ${e.slot} : ${e.epAddr} . ${e.epPort}`;
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

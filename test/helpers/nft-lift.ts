// Reads the kernel's listing of a kpng table (test/helpers/nft-list.ts) back into the tracer's form
// (tests only): each rule's expressions are evaluated symbolically (what each register holds, as
// nf_tables' expressions define it) and recognised as one of the backend's statements (types.ts), each
// element's bytes as one of its elements, each set's types as one of its set kinds. It is written from
// the expressions' meaning, not from the emitter (src/backend/nft/netlink.ts): a rule the emitter got
// wrong reads back as another statement, or as nothing (LiftError), and nft-compare.ts shows it.
import type { NftRuleInfo, NftSetInfo, NftTableListing } from '../../src/native';
import { addrText } from '../../src/native/addr-text';
import { MASQ_BIT, type ChainSpec, type Elem, type IpFamily, type L4, type Op, type SetSpec, type Stmt } from '../../src/backend/nft/types';
import { FakeNft } from '../../src/backend/nft/fake';

export class LiftError extends Error {}

type Expr = NftRuleInfo['exprs'][number];

// nft's datatype ids (a concatenation packs them 6 bits apart) and nf_tables' constants.
const TYPE = { integer: 4, ipv4: 7, ipv6: 8, proto: 12, service: 13, mark: 19 } as const;
const NFT_DATA_VERDICT = 0xffffff00;
const SET_MAP = 0x8, SET_TIMEOUT = 0x10, SET_EVAL = 0x20;
const CT_NEW = 0x8, CT_ESTABLISHED = 0x2, CT_RELATED = 0x4, IPS_DST_NAT = 0x20, RTN_LOCAL = 2;
const PROTO_BY_NUM: Record<number, L4> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

const cat = (...ids: number[]): number => ids.reduce((a, id) => a * 64 + id, 0);
const addrLen = (fam: IpFamily): number => (fam === 'ip' ? 4 : 16);
const addrType = (fam: IpFamily): number => (fam === 'ip' ? TYPE.ipv4 : TYPE.ipv6);
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const u32le = (b: Uint8Array, o = 0): number => (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
const isU32 = (b: Uint8Array, v: number): boolean => b.length === 4 && u32le(b) === v >>> 0;
const zero = (b: Uint8Array): boolean => b.every((x) => x === 0);

function addrOf(fam: IpFamily, b: Uint8Array, o = 0): string {
  if (b.length < o + addrLen(fam)) throw new LiftError(`short address in ${hex(b)}`);
  return addrText(Buffer.from(b.buffer, b.byteOffset, b.byteLength), o, fam === 'ip' ? 2 : 10);
}

/** A CIDR from a network and a mask; the mask must be a prefix and the network hold no host bits. */
function cidrOf(fam: IpFamily, net: Uint8Array, mask: Uint8Array): string {
  let bits = 0, ended = false;
  for (const m of mask) {
    for (let i = 7; i >= 0; i--) {
      if (m & (1 << i)) { if (ended) throw new LiftError(`mask ${hex(mask)} is not a prefix`); bits++; } else ended = true;
    }
  }
  if (net.some((x, i) => (x & ~mask[i]) !== 0)) throw new LiftError(`network ${hex(net)} has bits outside mask ${hex(mask)}`);
  return `${addrOf(fam, net)}/${bits}`;
}

// ---------------------------------------------------------------------------------------------
// Registers: 32-bit words from NFT_REG_1 on (NFT_REG_1..4 are 16 bytes each, NFT_REG32_00.. 4 bytes;
// the kernel lists a register in the 16-byte form when it is aligned to one).

type Val =
  | { k: 'saddr' | 'daddr' | 'saddr0' | 'daddr0' | 'dport' | 'l4proto' | 'mark' | 'iifname' | 'ctState' | 'ctStatus' }
  | { k: 'fibType'; of: 'saddr' | 'daddr' }
  | { k: 'numgen'; mod: number; offset: number }
  | { k: 'const'; bytes: Uint8Array }
  /** The address or port half of a data map's value (lookup `id` names the lookup). */
  | { k: 'mapAddr' | 'mapPort'; set: string; key: Val[]; id: number }
  | { k: 'masked'; of: Val; mask: Uint8Array; xor: Uint8Array };
interface Slot { v: Val; len: number }

function word(reg: number): number {
  if (reg >= 1 && reg <= 4) return (reg - 1) * 4;
  if (reg >= 8 && reg <= 23) return reg - 8;
  throw new LiftError(`register ${reg} is not a data register`);
}
const words = (len: number): number => Math.ceil(len / 4);
/** The register naming word `w` (NFT_REG32_00 is 8). */
const reg32 = (w: number): number => 8 + w;

class Regs {
  private readonly w: Array<{ slot: Slot; part: number } | undefined> = new Array(16);

  set(reg: number, v: Val, len: number): void {
    const at = word(reg);
    if (at + words(len) > 16) throw new LiftError(`${len} bytes do not fit from register ${reg}`);
    const slot: Slot = { v, len };
    for (let i = 0; i < words(len); i++) this.w[at + i] = { slot, part: i };
  }

  /** The value loaded whole at `reg` (none half overwritten since). */
  get(reg: number): Slot {
    const at = word(reg);
    const first = this.w[at];
    if (!first || first.part !== 0) throw new LiftError(`register ${reg} holds no whole value`);
    for (let i = 1; i < words(first.slot.len); i++) if (this.w[at + i]?.slot !== first.slot) throw new LiftError(`register ${reg}: value partly overwritten`);
    return first.slot;
  }

  /** The fields of a concatenated key of `len` bytes from `reg` (each field padded to 4 bytes). */
  key(reg: number, len: number): Val[] {
    const out: Val[] = [];
    let at = word(reg), got = 0;
    while (got < len) {
      const s = this.get(reg32(at));
      out.push(s.v);
      at += words(s.len);
      got += words(s.len) * 4;
    }
    if (got !== len) throw new LiftError(`key of ${len} bytes from register ${reg} ends inside a field`);
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// One rule: conditions (pure tests, any order), then statements (effects), then at most one verdict.

type Cond =
  | { c: 'ctNew' } | { c: 'ctDnat' } | { c: 'notLoopback' } | { c: 'markClear' }
  /** ct state & (established | related) == 0; ct status & dnat == 0 */
  | { c: 'ctUntracked' } | { c: 'ctNotDnat' }
  /** The first byte of an IPv4 address is (eq) or is not 127: inside 127.0.0.0/8. */
  | { c: 'loopbackNet'; of: 'saddr' | 'daddr'; eq: boolean }
  | { c: 'fibLocal'; of: 'saddr' | 'daddr' }
  | { c: 'cidr'; of: 'saddr' | 'daddr'; cidr: string }
  | { c: 'l4proto'; proto: L4 }
  | { c: 'iif'; name: string; prefix: boolean }
  | { c: 'random0'; mod: number }
  | { c: 'inSet'; set: string; key: Val[] };
type Effect = { e: 'markOr' } | { e: 'markXor' } | { e: 'update'; set: string; key: Val[] };
type Final =
  | { f: 'vmap'; set: string; key: Val[] }
  | { f: 'verdict'; v: string; chain?: string }
  | { f: 'reject'; type: string; code: number }
  | { f: 'dnat'; addr: Val; port: Val }
  | { f: 'masq'; fullyRandom: boolean };

const keyIs = (key: Val[], ...ks: Val['k'][]): boolean => key.length === ks.length && key.every((v, i) => v.k === ks[i]);

function cond(fam: IpFamily, s: Slot, op: string, data: Uint8Array): Cond {
  const v = s.v;
  const exact = data.length === s.len;
  if (v.k === 'l4proto' && op === 'eq' && exact && PROTO_BY_NUM[data[0]]) return { c: 'l4proto', proto: PROTO_BY_NUM[data[0]] };
  if (v.k === 'fibType' && op === 'eq' && isU32(data, RTN_LOCAL)) return { c: 'fibLocal', of: v.of };
  if (v.k === 'daddr0' && fam === 'ip' && op === 'neq' && exact && data[0] === 127) return { c: 'notLoopback' };
  if (v.k === 'daddr0' && fam === 'ip' && op === 'eq' && exact && data[0] === 127) return { c: 'loopbackNet', of: 'daddr', eq: true };
  if (v.k === 'saddr0' && fam === 'ip' && (op === 'eq' || op === 'neq') && exact && data[0] === 127) return { c: 'loopbackNet', of: 'saddr', eq: op === 'eq' };
  if (v.k === 'daddr' && fam === 'ip6' && op === 'neq' && exact && addrOf(fam, data) === '::1') return { c: 'notLoopback' };
  if ((v.k === 'saddr' || v.k === 'daddr') && op === 'eq' && exact) return { c: 'cidr', of: v.k, cidr: cidrOf(fam, data, new Uint8Array(data.length).fill(0xff)) };
  if (v.k === 'iifname' && op === 'eq' && data.length >= 1 && data.length <= 16) {
    const nul = data.indexOf(0);
    if (data.length === 16) {
      // The whole field: the name, then NUL padding.
      if (nul <= 0 || !zero(data.subarray(nul))) throw new LiftError(`iifname ${hex(data)} is not a NUL-padded name`);
      return { c: 'iif', name: Buffer.from(data.subarray(0, nul)).toString('utf8'), prefix: false };
    }
    // Fewer bytes than the field: the name's first bytes (nft's "PREFIX*").
    if (nul >= 0) throw new LiftError(`iifname prefix ${hex(data)} holds a NUL`);
    return { c: 'iif', name: Buffer.from(data).toString('utf8'), prefix: true };
  }
  if (v.k === 'numgen' && v.offset === 0 && op === 'eq' && isU32(data, 0)) return { c: 'random0', mod: v.mod };
  if (v.k === 'masked' && zero(v.xor)) {
    const of = v.of;
    if (of.k === 'ctState' && isU32(v.mask, CT_NEW) && op === 'neq' && isU32(data, 0)) return { c: 'ctNew' };
    if (of.k === 'ctStatus' && isU32(v.mask, IPS_DST_NAT) && op === 'neq' && isU32(data, 0)) return { c: 'ctDnat' };
    if (of.k === 'ctStatus' && isU32(v.mask, IPS_DST_NAT) && op === 'eq' && isU32(data, 0)) return { c: 'ctNotDnat' };
    if (of.k === 'ctState' && isU32(v.mask, CT_ESTABLISHED | CT_RELATED) && op === 'eq' && isU32(data, 0)) return { c: 'ctUntracked' };
    if (of.k === 'mark' && isU32(v.mask, MASQ_BIT) && op === 'eq' && isU32(data, 0)) return { c: 'markClear' };
    if ((of.k === 'saddr' || of.k === 'daddr') && op === 'eq' && exact) return { c: 'cidr', of: of.k, cidr: cidrOf(fam, data, v.mask) };
  }
  throw new LiftError(`cmp ${op} ${hex(data)} on ${JSON.stringify(v)} is no condition kpng means`);
}

export interface SetInfo { name: string; keyLen: number; map: 'verdict' | 'data' | null; dataLen?: number }

/** What one rule's expressions do, read symbolically. */
function readRule(fam: IpFamily, exprs: Expr[], sets: Map<string, SetInfo>): { conds: Cond[]; effects: Effect[]; final?: Final } {
  const regs = new Regs();
  let lookups = 0;
  const conds: Cond[] = [];
  const effects: Effect[] = [];
  let final: Final | undefined;
  const setOf = (name: string): SetInfo => {
    const s = sets.get(name);
    if (!s) throw new LiftError(`no set ${name}`);
    return s;
  };
  for (const x of exprs) {
    if (final) throw new LiftError(`${x.type} after the rule's verdict`);
    const effect = (e: Effect): void => { effects.push(e); };
    const test = (c: Cond): void => {
      // A test after a statement would leave the statement done for packets it then stops.
      if (effects.length) throw new LiftError(`condition ${c.c} after a statement`);
      conds.push(c);
    };
    switch (x.type) {
      case 'payload': {
        const p = x as Extract<Expr, { type: 'payload' }>;
        const at = `${p.base}:${p.offset}:${p.len}`;
        const net: Record<string, Val['k']> = fam === 'ip'
          ? { 'network:12:4': 'saddr', 'network:16:4': 'daddr', 'network:12:1': 'saddr0', 'network:16:1': 'daddr0' }
          : { 'network:8:16': 'saddr', 'network:24:16': 'daddr' };
        const k = at === 'transport:2:2' ? 'dport' : net[at];
        if (!k) throw new LiftError(`payload ${at} is no field kpng reads`);
        regs.set(p.dreg, { k } as Val, p.len);
        break;
      }
      case 'meta': {
        const m = x as Extract<Expr, { type: 'meta' }>;
        const len = { l4proto: 1, mark: 4, iifname: 16 }[m.key as string];
        if (!len) throw new LiftError(`meta ${m.key} is no key kpng reads`);
        regs.set(m.dreg, { k: m.key } as Val, len);
        break;
      }
      case 'metaSet': {
        const m = x as Extract<Expr, { type: 'metaSet' }>;
        const s = regs.get(m.sreg);
        if (m.key !== 'mark' || s.v.k !== 'masked' || s.v.of.k !== 'mark' || s.len !== 4) throw new LiftError(`meta ${m.key} set from ${JSON.stringify(s.v)}`);
        if (isU32(s.v.mask, ~MASQ_BIT) && isU32(s.v.xor, MASQ_BIT)) effect({ e: 'markOr' });
        else if (isU32(s.v.mask, 0xffffffff) && isU32(s.v.xor, MASQ_BIT)) effect({ e: 'markXor' });
        else throw new LiftError(`meta mark set (mark & ${hex(s.v.mask)}) ^ ${hex(s.v.xor)}`);
        break;
      }
      case 'ct': {
        const c = x as Extract<Expr, { type: 'ct' }>;
        if ((c.key !== 'state' && c.key !== 'status') || ('dir' in c && c.dir !== undefined)) throw new LiftError(`ct ${c.key} is no key kpng reads`);
        regs.set(c.dreg, { k: c.key === 'state' ? 'ctState' : 'ctStatus' }, 4);
        break;
      }
      case 'fib': {
        const f = x as Extract<Expr, { type: 'fib' }>;
        if (f.result !== 'addrtype' || f.flags.length !== 1 || (f.flags[0] !== 'saddr' && f.flags[0] !== 'daddr')) throw new LiftError(`fib ${f.flags.join(',')} ${f.result}`);
        regs.set(f.dreg, { k: 'fibType', of: f.flags[0] }, 4);
        break;
      }
      case 'bitwise': {
        const b = x as Extract<Expr, { type: 'bitwise' }>;
        const s = regs.get(b.sreg);
        if (s.len !== b.len || b.mask.length !== b.len || b.xor.length !== b.len) throw new LiftError(`bitwise of ${b.len} bytes over a ${s.len}-byte value`);
        regs.set(b.dreg, { k: 'masked', of: s.v, mask: b.mask, xor: b.xor }, b.len);
        break;
      }
      case 'cmp': {
        const c = x as Extract<Expr, { type: 'cmp' }>;
        test(cond(fam, regs.get(c.sreg), c.op, c.data));
        break;
      }
      case 'numgen': {
        const n = x as Extract<Expr, { type: 'numgen' }>;
        if (n.mode !== 'random' || n.mod < 1) throw new LiftError(`numgen ${n.mode} mod ${n.mod}`);
        regs.set(n.dreg, { k: 'numgen', mod: n.mod, offset: n.offset ?? 0 }, 4);
        break;
      }
      case 'immediate': {
        const im = x as Extract<Expr, { type: 'immediate' }>;
        regs.set(im.dreg, { k: 'const', bytes: im.data }, im.data.length);
        break;
      }
      case 'lookup': {
        const l = x as Extract<Expr, { type: 'lookup' }>;
        if (l.invert) throw new LiftError(`inverted lookup in ${l.set}`);
        const s = setOf(l.set);
        const key = regs.key(l.sreg, s.keyLen);
        if (l.dreg === undefined) {
          if (s.map) throw new LiftError(`membership test in map ${l.set}`);
          test({ c: 'inSet', set: l.set, key });
        } else if (l.dreg === 0) {
          if (s.map !== 'verdict') throw new LiftError(`verdict lookup in ${l.set}, not a verdict map`);
          final = { f: 'vmap', set: l.set, key };
        } else {
          // A data map of address . port: the address in the first register(s), the port after it.
          if (s.map !== 'data' || s.dataLen !== addrLen(fam) + 4) throw new LiftError(`data lookup in ${l.set}, not an address . port map`);
          const id = ++lookups;
          regs.set(l.dreg, { k: 'mapAddr', set: l.set, key, id }, addrLen(fam));
          regs.set(reg32(word(l.dreg) + words(addrLen(fam))), { k: 'mapPort', set: l.set, key, id }, 2);
        }
        break;
      }
      case 'dynset': {
        const d = x as Extract<Expr, { type: 'dynset' }>;
        if (d.op !== 'update' || d.sregData !== undefined || d.timeout) throw new LiftError(`dynset ${d.op}${d.timeout ? ` timeout ${d.timeout}` : ''} in ${d.set}`);
        effect({ e: 'update', set: d.set, key: regs.key(d.sregKey, setOf(d.set).keyLen) });
        break;
      }
      case 'verdict': {
        const v = (x as Extract<Expr, { type: 'verdict' }>).verdict;
        final = typeof v === 'string' ? { f: 'verdict', v } : 'jump' in v ? { f: 'verdict', v: 'jump', chain: v.jump } : { f: 'verdict', v: 'goto', chain: v.goto };
        break;
      }
      case 'reject': {
        const r = x as Extract<Expr, { type: 'reject' }>;
        final = { f: 'reject', type: r.reject, code: r.code ?? 0 };
        break;
      }
      case 'nat': {
        const n = x as Extract<Expr, { type: 'nat' }>;
        if (n.nat !== 'dnat' || n.family !== fam || n.flags || n.regAddrMin === undefined || n.regProtoMin === undefined) throw new LiftError(`nat ${JSON.stringify(n)}`);
        // One address and one port, not a range.
        if ((n.regAddrMax ?? n.regAddrMin) !== n.regAddrMin || (n.regProtoMax ?? n.regProtoMin) !== n.regProtoMin) throw new LiftError('dnat to a range');
        const a = regs.get(n.regAddrMin), p = regs.get(n.regProtoMin);
        if (!((a.v.k === 'const' && a.len === addrLen(fam)) || a.v.k === 'mapAddr')) throw new LiftError(`dnat address from ${JSON.stringify(a.v)}`);
        if (!((p.v.k === 'const' && p.len === 2) || p.v.k === 'mapPort')) throw new LiftError(`dnat port from ${JSON.stringify(p.v)}`);
        final = { f: 'dnat', addr: a.v, port: p.v };
        break;
      }
      case 'masq': {
        const m = x as Extract<Expr, { type: 'masq' }>;
        if (m.regProtoMin !== undefined || m.flags?.random || m.flags?.persistent) throw new LiftError(`masq ${JSON.stringify(m)}`);
        final = { f: 'masq', fullyRandom: !!m.flags?.fullyRandom };
        break;
      }
      default:
        throw new LiftError(`expression ${x.type} is none kpng writes`);
    }
  }
  return { conds, effects, ...(final ? { final } : {}) };
}

/** The statement one rule is, or a LiftError saying why it is none. */
export function liftRule(fam: IpFamily, exprs: Expr[], sets: Map<string, SetInfo>): Stmt {
  const { conds, effects, final } = readRule(fam, exprs, sets);
  const left = [...conds];
  const take = <C extends Cond['c']>(c: C, ok: (x: Extract<Cond, { c: C }>) => boolean = () => true): Extract<Cond, { c: C }> | undefined => {
    const i = left.findIndex((x) => x.c === c && ok(x as Extract<Cond, { c: C }>));
    return i < 0 ? undefined : (left.splice(i, 1)[0] as Extract<Cond, { c: C }>);
  };
  const only = (st: Stmt, effectsAllowed = 0): Stmt => {
    if (left.length) throw new LiftError(`conditions ${JSON.stringify(left)} are not part of a ${st.type} rule`);
    if (effects.length > effectsAllowed) throw new LiftError(`statements ${JSON.stringify(effects)} are not part of a ${st.type} rule`);
    return st;
  };
  const all = fam === 'ip' ? '0.0.0.0/0' : '::/0';
  if (!final) {
    if (effects.length === 1 && effects[0].e === 'markXor') return only({ type: 'clearMark' }, 1);
    const u = effects[0];
    if (effects.length === 1 && u.e === 'update' && keyIs(u.key, 'saddr')) return only({ type: 'affinityUpdate', set: u.set }, 1);
    throw new LiftError(`statements without a verdict: ${JSON.stringify(effects)}`);
  }
  switch (final.f) {
    case 'vmap': {
      const ctNew = take('ctNew') ? { ctNew: true } : {};
      if (keyIs(final.key, 'daddr', 'l4proto', 'dport')) return only({ type: 'vmapVip', map: final.set, ...ctNew });
      if (keyIs(final.key, 'l4proto', 'dport')) {
        const local = take('fibLocal', (c) => c.of === 'daddr');
        const cidr = take('cidr', (c) => c.of === 'daddr');
        const nl = take('notLoopback');
        if (nl && !local) throw new LiftError('a loopback test without fib daddr type local');
        // A local rule with neither a CIDR nor a loopback test serves every local address: a /0.
        const daddrCidr = cidr?.cidr ?? (local && !nl ? all : undefined);
        return only({ type: 'vmapPort', map: final.set, ...ctNew, ...(local ? { local: true } : {}), ...(daddrCidr ? { daddrCidr } : {}), ...(local && cidr && nl ? { exceptLoopback: true } : {}) });
      }
      throw new LiftError(`vmap key ${final.key.map((v) => v.k).join(' . ')}`);
    }
    case 'verdict': {
      const masq = effects.length === 1 && effects[0].e === 'markOr';
      if (final.v === 'jump' && final.chain) return only({ type: 'jump', chain: final.chain });
      if (final.v === 'goto' && final.chain) {
        const chain = final.chain;
        const src = take('cidr', (c) => c.of === 'saddr');
        if (src) return only({ type: 'classGoto', from: { cidr: src.cidr }, masq, chain }, 1);
        const iif = take('iif');
        if (iif) return only({ type: 'classGoto', from: { iifname: iif.name, prefix: iif.prefix }, masq, chain }, 1);
        if (take('fibLocal', (c) => c.of === 'saddr')) return only({ type: 'classGoto', from: 'local', masq, chain }, 1);
        const aff = take('inSet');
        if (aff && keyIs(aff.key, 'saddr')) return only({ type: 'affinityGoto', set: aff.set, chain });
        const r = take('random0');
        if (r) return only({ type: 'randomGoto', mod: r.mod, chain });
        return masq ? only({ type: 'classGoto', from: 'any', masq, chain }, 1) : only({ type: 'goto', chain });
      }
      if (final.v === 'return') {
        const src = take('cidr', (c) => c.of === 'saddr');
        if (src) return only({ type: 'srcCidr', cidr: src.cidr, then: 'return' });
        const iif = take('iif');
        if (iif) return only({ type: 'iifReturn', iifname: iif.name, prefix: iif.prefix });
        if (take('markClear')) return only({ type: 'returnIfNoMark' });
        return only({ type: 'srcCidr', cidr: all, then: 'return' });
      }
      if (final.v === 'drop') {
        if (take('loopbackNet', (c) => c.of === 'daddr' && c.eq) && take('loopbackNet', (c) => c.of === 'saddr' && !c.eq) && take('ctUntracked') && take('ctNotDnat')) {
          return only({ type: 'dropLocalnet' });
        }
        return only({ type: 'drop' });
      }
      throw new LiftError(`verdict ${final.v}`);
    }
    case 'reject': {
      if (final.type === 'tcpReset' && take('l4proto', (c) => c.proto === 'tcp')) return only({ type: 'rejectTcp' });
      // ICMP port unreachable: code 3; ICMPv6 port unreachable: code 4.
      if (final.type !== 'icmp' || final.code !== (fam === 'ip' ? 3 : 4)) throw new LiftError(`reject ${final.type} code ${final.code}`);
      if (take('ctNew')) {
        const s = take('inSet', (c) => keyIs(c.key, 'daddr'));
        if (!s) throw new LiftError('ct state new reject without a daddr set');
        return only({ type: 'rejectDaddrInSet', set: s.set });
      }
      return only({ type: 'rejectIcmp' });
    }
    case 'dnat': {
      const p = take('l4proto');
      if (!p) throw new LiftError('dnat without a protocol test');
      const { addr, port } = final;
      if (addr.k === 'const' && port.k === 'const') {
        return only({ type: 'dnat', proto: p.proto, addr: addrOf(fam, addr.bytes), port: (port.bytes[0] << 8) | port.bytes[1] });
      }
      if (addr.k !== 'mapAddr' || port.k !== 'mapPort' || addr.id !== port.id) throw new LiftError('dnat address and port from different places');
      const key = addr.key;
      const ng = key[key.length - 1];
      if (ng?.k !== 'numgen') throw new LiftError(`endpoint map ${addr.set} keyed without numgen`);
      // The tracer reads slots 0..n-1 of the destination.
      if (ng.offset !== 0) throw new LiftError(`pick map ${addr.set} read with numgen offset ${ng.offset}`);
      if (keyIs(key, 'daddr', 'l4proto', 'dport', 'numgen')) return only({ type: 'dnatPick', proto: p.proto, n: ng.mod, map: addr.set, key: 'vip' });
      if (keyIs(key, 'l4proto', 'dport', 'numgen')) return only({ type: 'dnatPick', proto: p.proto, n: ng.mod, map: addr.set, key: 'port' });
      throw new LiftError(`pick key ${key.map((v) => v.k).join(' . ')}`);
    }
    case 'masq': {
      if (final.fullyRandom) {
        if (take('ctDnat') && take('loopbackNet', (c) => c.of === 'saddr' && c.eq)) return only({ type: 'localnetMasq' });
        return only({ type: 'masquerade' });
      }
      const dn = take('ctDnat');
      // The tracer reads the hairpin set by its name.
      const pair = take('inSet', (c) => c.set === 'hairpin' && keyIs(c.key, 'saddr', 'daddr'));
      if (!dn || !pair) throw new LiftError('masquerade (not fully random) other than the hairpin rule');
      return only({ type: 'hairpinMasq' });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sets and elements.

function setSpec(fam: IpFamily, s: NftSetInfo): SetSpec & { info: SetInfo } {
  const a = addrType(fam), al = addrLen(fam);
  const is = (flags: number, keyType: number, keyLen: number, dataType?: number, dataLen?: number): boolean =>
    s.flags === flags && s.keyType === keyType && s.keyLen === keyLen && s.dataType === dataType && (dataType === undefined || dataType === NFT_DATA_VERDICT || s.dataLen === dataLen);
  // An affinity set's capacity is the renderer's constant (the datapath fills it), not part of the plan.
  const spec = (kind: SetSpec['kind'], map: SetInfo['map'], extra: Partial<SetSpec> = {}) => ({
    name: s.name, kind, ...extra, ...(s.size !== undefined && kind !== 'affinity' ? { size: s.size } : {}),
    info: { name: s.name, keyLen: s.keyLen, map, ...(s.dataLen !== undefined ? { dataLen: s.dataLen } : {}) },
  });
  const epData = cat(a, TYPE.service);
  if (is(SET_MAP, cat(a, TYPE.proto, TYPE.service), al + 8, NFT_DATA_VERDICT)) return spec('vipMap', 'verdict');
  if (is(SET_MAP, cat(TYPE.proto, TYPE.service), 8, NFT_DATA_VERDICT)) return spec('portMap', 'verdict');
  if (is(SET_MAP, cat(a, TYPE.proto, TYPE.service, TYPE.mark), al + 12, epData, al + 4)) return spec('pickVipMap', 'data');
  if (is(SET_MAP, cat(TYPE.proto, TYPE.service, TYPE.mark), 12, epData, al + 4)) return spec('pickPortMap', 'data');
  if (is(0, cat(a, a), 2 * al)) return spec('pairSet', null);
  if (is(0, a, al)) return spec('addrSet', null);
  if (is(SET_TIMEOUT | SET_EVAL, a, al) && s.timeout && s.timeout % 1000 === 0) return spec('affinity', null, { timeoutSec: s.timeout / 1000 });
  throw new LiftError(`set ${s.name}: flags ${s.flags} key ${s.keyType}/${s.keyLen} data ${s.dataType}/${s.dataLen} is no set kind of kpng's`);
}

function protoAt(b: Uint8Array, o: number): L4 {
  const p = PROTO_BY_NUM[b[o]];
  if (!p || !zero(b.subarray(o + 1, o + 4))) throw new LiftError(`protocol field ${hex(b.subarray(o, o + 4))}`);
  return p;
}
function portAt(b: Uint8Array, o: number): number {
  if (!zero(b.subarray(o + 2, o + 4))) throw new LiftError(`port field ${hex(b.subarray(o, o + 4))} has padding set`);
  return (b[o] << 8) | b[o + 1];
}

function liftElem(fam: IpFamily, spec: SetSpec, e: NftSetInfo['elements'][number]): Elem {
  const al = addrLen(fam), k = e.key;
  if (e.intervalEnd || e.keyEnd || e.comment) throw new LiftError(`element ${hex(k)} of ${spec.name}: interval or comment`);
  if (spec.kind !== 'affinity' && (e.timeout || e.expires)) throw new LiftError(`element ${hex(k)} of ${spec.name} has a timeout`);
  const verdict = (): Extract<Elem, { type: 'vip' }>['verdict'] => {
    const v = e.verdict;
    if (v === 'drop') return 'drop';
    if (v && typeof v === 'object' && 'goto' in v) return { goto: v.goto };
    throw new LiftError(`element ${hex(k)} of ${spec.name}: verdict ${JSON.stringify(v)}`);
  };
  const ep = (): { addr: string; port: number } => {
    if (!e.data || e.data.length !== al + 4) throw new LiftError(`element ${hex(k)} of ${spec.name}: data ${e.data ? hex(e.data) : 'none'}`);
    return { addr: addrOf(fam, e.data), port: portAt(e.data, al) };
  };
  const len = (n: number): void => { if (k.length !== n) throw new LiftError(`element ${hex(k)} of ${spec.name}: ${k.length} bytes, not ${n}`); };
  switch (spec.kind) {
    case 'vipMap': len(al + 8); return { type: 'vip', addr: addrOf(fam, k), proto: protoAt(k, al), port: portAt(k, al + 4), verdict: verdict() };
    case 'portMap': len(8); return { type: 'port', proto: protoAt(k, 0), port: portAt(k, 4), verdict: verdict() };
    case 'pickVipMap': { len(al + 12); const d = ep(); return { type: 'pick', addr: addrOf(fam, k), proto: protoAt(k, al), port: portAt(k, al + 4), slot: u32le(k, al + 8), epAddr: d.addr, epPort: d.port }; }
    case 'pickPortMap': { len(12); const d = ep(); return { type: 'pick', proto: protoAt(k, 0), port: portAt(k, 4), slot: u32le(k, 8), epAddr: d.addr, epPort: d.port }; }
    case 'pairSet': {
      len(2 * al);
      const a = addrOf(fam, k), b = addrOf(fam, k, al);
      if (a !== b) throw new LiftError(`hairpin element ${a} . ${b}: not one address twice`);
      return { type: 'pair', addr: a };
    }
    case 'addrSet': len(al); return { type: 'addr', addr: addrOf(fam, k) };
    case 'affinity': throw new LiftError(`affinity set ${spec.name} holds ${addrOf(fam, k)} (the datapath added it)`);
  }
}

// ---------------------------------------------------------------------------------------------
// A table.

/** The ops that build, in the tracer's fake, the table the listing shows. */
export function liftOps(fam: IpFamily, l: NftTableListing): Op[] {
  const ops: Op[] = [{ kind: 'resetTable' }];
  const infos = new Map<string, SetInfo>();
  const specs: SetSpec[] = [];
  for (const s of l.sets) {
    const { info, ...spec } = setSpec(fam, s);
    infos.set(s.name, info);
    specs.push(spec);
    ops.push({ kind: 'addSet', set: spec });
  }
  for (const c of l.chains) {
    let spec: ChainSpec = { name: c.name };
    if (c.hook !== undefined) {
      // The tracer lets a packet through a base chain that ends without a verdict.
      if ((c.type !== 'nat' && c.type !== 'filter') || c.policy !== 'accept' || c.hook === 'ingress' || c.priority === undefined) {
        throw new LiftError(`chain ${c.name}: ${c.type} ${c.hook} priority ${c.priority} policy ${c.policy}`);
      }
      spec = { name: c.name, hook: { type: c.type, hook: c.hook, priority: c.priority } };
    }
    ops.push({ kind: 'addChain', chain: spec });
  }
  specs.forEach((spec, i) => {
    const elems = l.sets[i].elements.map((e) => liftElem(fam, spec, e));
    if (elems.length) ops.push({ kind: 'addElems', set: spec.name, elems });
  });
  for (const r of l.rules) {
    try {
      ops.push({ kind: 'addRule', chain: r.chain, stmt: liftRule(fam, r.exprs, infos) });
    } catch (e) {
      if (!(e instanceof LiftError)) throw e;
      throw new LiftError(`${fam} chain ${r.chain} rule ${r.handle}: ${e.message}\n  ${JSON.stringify(r.exprs, (_, v) => (v instanceof Uint8Array ? hex(v) : v))}`);
    }
  }
  return ops;
}

/** A fake holding the kernel's tables (as listed), for the tracer; the fake checks them as it would a batch. */
export function kernelFake(listings: Partial<Record<IpFamily, NftTableListing>>): FakeNft {
  const nft = new FakeNft();
  nft.apply((Object.keys(listings) as IpFamily[]).map((fam) => ({ fam, ops: liftOps(fam, listings[fam]!) })));
  return nft;
}

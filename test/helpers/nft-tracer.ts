// An in-memory model of kpng's nftables tables and a packet tracer over it (tests only).
//
// FakeNft applies the nft backend's own ops (src/backend/nft/types.ts) to one table per family, with
// the kernel's rules for a transaction: every op of a batch or none; a rule or element may only name
// chains and sets that exist; a chain or set still in use, a chain that still has rules, a missing
// element cannot be deleted; an element cannot be re-added with other data; NAT statements only run
// from NAT base chains. The tracer then sends a virtual packet through the base chains in hook and
// priority order and reports where it goes: every endpoint it may be DNATed to (all branches of a
// random choice are followed), DROP, REJECT or ACCEPT (untouched), and whether it is masqueraded.
// The idea follows upstream kube-proxy's pkg/proxy/nftables/helpers_test.go over knftables' fake;
// this version reads the backend's structured ops, so it needs no rule parser. The fake is checked
// against the kernel: test/e2e/nft-tracer-vs-kernel.test.ts lists what the addon put in the kernel for
// the same plan, reads it back (nft-lift.ts) and compares it with these tables (nft-compare.ts).
import { stmtText } from '../../src/backend/nft/text';
import { MASQ_BIT, type ChainSpec, type Elem, type Fam, type FamOps, type L4, type Op, type SetKind, type SetSpec, type Stmt } from '../../src/backend/nft/types';

export class NftFakeError extends Error {}
export class TraceError extends Error {}

// ---------------------------------------------------------------------------------------------
// Addresses, as the kernel sees them: bytes.

function v4Bytes(a: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(a);
  if (!m) return null;
  const b = m.slice(1).map(Number);
  return b.every((x) => x <= 255) ? b : null;
}

function v6Bytes(a: string): number[] | null {
  let text = a;
  let tail: number[] = [];
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const b = v4Bytes(dotted[1]);
    if (!b) return null;
    tail = b;
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const words = (s: string): number[] => (s === '' ? [] : s.split(':').map((h) => (/^[0-9a-fA-F]{1,4}$/.test(h) ? parseInt(h, 16) : NaN)));
  const head = words(halves[0]);
  const rest = halves.length === 2 ? words(halves[1]) : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const all = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...rest];
  if (all.length !== 8 || all.some((w) => Number.isNaN(w))) return null;
  const bytes = all.flatMap((w) => [w >> 8, w & 255]);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The address's bytes (4 or 16); throws on anything else. */
export function addrBytes(a: string): number[] {
  const b = a.includes(':') ? v6Bytes(a) : v4Bytes(a);
  if (!b) throw new NftFakeError(`not an IP address: ${JSON.stringify(a)}`);
  return b;
}

const famOfAddr = (a: string): Fam => (addrBytes(a).length === 4 ? 'ip' : 'ip6');
/** One text per address (what the kernel compares: bytes). */
const canon = (a: string): string => addrBytes(a).join('.');

export function inCidr(addr: string, cidr: string): boolean {
  const [net, lenText] = cidr.split('/');
  const a = addrBytes(addr), n = addrBytes(net);
  if (a.length !== n.length) return false;
  let bits = lenText === undefined ? a.length * 8 : Number(lenText);
  for (let i = 0; i < a.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((a[i] & mask) !== (n[i] & mask)) return false;
  }
  return true;
}

const isLoopback = (a: string): boolean => (famOfAddr(a) === 'ip' ? inCidr(a, '127.0.0.0/8') : canon(a) === canon('::1'));
const hostPort = (a: string, port: number): string => (a.includes(':') ? `[${a}]:${port}` : `${a}:${port}`);

// ---------------------------------------------------------------------------------------------
// The fake tables.

interface FakeSet {
  spec: SetSpec;
  elems: Map<string, Elem>;
  /** Elements added by the datapath (affinity `update`): canonical address -> expiry (seconds). */
  dynamic: Map<string, number>;
}
interface FakeChain { spec: ChainSpec; rules: Stmt[] }

export class FakeTable {
  exists = false;
  sets = new Map<string, FakeSet>();
  chains = new Map<string, FakeChain>();
  /** Flowtables by name: their devices. */
  flowtables = new Map<string, Set<string>>();

  clone(): FakeTable {
    const t = new FakeTable();
    t.exists = this.exists;
    for (const [n, d] of this.flowtables) t.flowtables.set(n, new Set(d));
    for (const [n, s] of this.sets) t.sets.set(n, { spec: s.spec, elems: new Map(s.elems), dynamic: new Map(s.dynamic) });
    for (const [n, c] of this.chains) t.chains.set(n, { spec: c.spec, rules: [...c.rules] });
    return t;
  }
}

const ELEM_KIND: Record<Elem['t'], SetKind[]> = { vip: ['vipMap'], port: ['portMap'], pick: ['pickVipMap', 'pickPortMap'], pair: ['pairSet'], addr: ['addrSet', 'affinity'] };

/** The element's key as the kernel compares it. */
function elemKey(e: Elem): string {
  switch (e.t) {
    case 'vip': return `${canon(e.addr)}|${e.proto}|${e.port}`;
    case 'port': return `${e.proto}|${e.port}`;
    case 'pick': return `${pickDest(e)}|${e.i}`;
    case 'pair': return `${canon(e.addr)}|${canon(e.addr)}`;
    case 'addr': return canon(e.addr);
  }
}

function elemData(e: Elem): string {
  switch (e.t) {
    case 'vip': case 'port': return JSON.stringify(e.v);
    case 'pick': return `${canon(e.epAddr)}|${e.epPort}`;
    default: return '';
  }
}

function elemAddrs(e: Elem): string[] {
  if (e.t === 'pick') return e.addr !== undefined ? [e.addr, e.epAddr] : [e.epAddr];
  return e.t === 'vip' || e.t === 'pair' || e.t === 'addr' ? [e.addr] : [];
}

/** The destination part of a pick element's key. */
const pickDest = (e: Extract<Elem, { t: 'pick' }>): string => (e.addr !== undefined ? `${canon(e.addr)}|${e.proto}|${e.port}` : `${e.proto}|${e.port}`);

/** Chains a rule names. */
export function stmtChains(st: Stmt): string[] {
  switch (st.s) {
    case 'jump': case 'goto': case 'classGoto': case 'affinityGoto': case 'randomGoto': return [st.chain];
    case 'srcCidr': return st.then === 'return' ? [] : [st.then.goto];
    default: return [];
  }
}

/** Sets a rule names, with the kind each must be. */
export function stmtSets(st: Stmt): Array<[string, SetKind]> {
  switch (st.s) {
    case 'vmapVip': return [[st.map, 'vipMap']];
    case 'vmapPort': return [[st.map, 'portMap']];
    case 'rejectDaddrInSet': return [[st.set, 'addrSet']];
    case 'dnatPick': return [[st.map, st.key === 'vip' ? 'pickVipMap' : 'pickPortMap']];
    case 'affinityGoto': case 'affinityUpdate': return [[st.set, 'affinity']];
    case 'hairpinMasq': return [['hairpin', 'pairSet']];
    default: return [];
  }
}

const elemChain = (e: Elem): string | null => ((e.t === 'vip' || e.t === 'port') && e.v !== 'drop' ? e.v.goto : null);

/** Statements that only NAT base chains may reach (the kernel refuses them elsewhere). */
const NAT_ONLY: Partial<Record<Stmt['s'], Array<'prerouting' | 'output' | 'postrouting'>>> = {
  dnatPick: ['prerouting', 'output'],
  dnat: ['prerouting', 'output'],
  masquerade: ['postrouting'],
  hairpinMasq: ['postrouting'],
  localnetMasq: ['postrouting'],
};

export class FakeNft {
  tables: Record<Fam, FakeTable> = { ip: new FakeTable(), ip6: new FakeTable() };
  /** The datapath's clock, in seconds (affinity timeouts). */
  now = 0;
  /** Batches applied. */
  batches = 0;

  /** One atomic transaction over both families: all ops or, on the first error, none (the error is thrown). */
  apply(famOps: FamOps[]): void {
    const next: Record<Fam, FakeTable> = { ip: this.tables.ip.clone(), ip6: this.tables.ip6.clone() };
    for (const f of famOps) {
      f.ops.forEach((op, i) => {
        try {
          applyOp(next[f.fam], f.fam, op);
        } catch (e) {
          throw new NftFakeError(`${f.fam} op #${i} ${JSON.stringify(op).slice(0, 300)}: ${(e as Error).message}`);
        }
      });
      validate(next[f.fam], f.fam);
    }
    this.tables = next;
    this.batches++;
  }

  applyOps(fam: Fam, ops: Op[]): void {
    this.apply([{ fam, ops }]);
  }
}

function applyOp(t: FakeTable, fam: Fam, op: Op): void {
  if (op.k === 'resetTable') {
    // Add, delete and add again: a new, empty table.
    t.exists = true;
    t.sets = new Map();
    t.chains = new Map();
    t.flowtables = new Map();
    return;
  }
  if (op.k === 'addTable') {
    t.exists = true;
    return;
  }
  if (!t.exists) throw new NftFakeError('ENOENT: no such table');
  switch (op.k) {
    case 'addSet': {
      const cur = t.sets.get(op.set.name);
      if (cur) {
        if (JSON.stringify(cur.spec) !== JSON.stringify(op.set)) throw new NftFakeError(`EEXIST: set ${op.set.name} exists with another type`);
        return;
      }
      t.sets.set(op.set.name, { spec: op.set, elems: new Map(), dynamic: new Map() });
      return;
    }
    case 'delSet': {
      if (!t.sets.has(op.name)) throw new NftFakeError(`ENOENT: no set ${op.name}`);
      const users = [...t.chains].filter(([, c]) => c.rules.some((r) => stmtSets(r).some(([s]) => s === op.name))).map(([n]) => n);
      if (users.length) throw new NftFakeError(`EBUSY: set ${op.name} is used by chain(s) ${users.join(', ')}`);
      t.sets.delete(op.name);
      return;
    }
    case 'addChain': {
      const cur = t.chains.get(op.chain.name);
      if (cur) {
        if (JSON.stringify(cur.spec.hook ?? null) !== JSON.stringify(op.chain.hook ?? null)) throw new NftFakeError(`EEXIST: chain ${op.chain.name} exists with another hook`);
        return;
      }
      t.chains.set(op.chain.name, { spec: op.chain, rules: [] });
      return;
    }
    case 'addFlowtable': {
      // As the kernel: an add of an existing flowtable adds the devices it lacks.
      const cur = t.flowtables.get(op.flowtable.name) ?? new Set<string>();
      for (const d of op.flowtable.devices) cur.add(d);
      t.flowtables.set(op.flowtable.name, cur);
      return;
    }
    case 'delFlowtable': {
      if (!t.flowtables.has(op.name)) throw new NftFakeError(`ENOENT: no flowtable ${op.name}`);
      const users = [...t.chains].filter(([, c]) => c.rules.some((r) => r.s === 'flowOffload' && r.flowtable === op.name)).map(([n]) => n);
      if (users.length) throw new NftFakeError(`EBUSY: flowtable ${op.name} is used by chain(s) ${users.join(', ')}`);
      t.flowtables.delete(op.name);
      return;
    }
    case 'flushSet': {
      const s = t.sets.get(op.name);
      if (!s) throw new NftFakeError(`ENOENT: no set ${op.name}`);
      s.elems.clear();
      s.dynamic.clear();
      return;
    }
    case 'flushChain': {
      const c = t.chains.get(op.name);
      if (!c) throw new NftFakeError(`ENOENT: no chain ${op.name}`);
      c.rules = [];
      return;
    }
    case 'delChain': {
      const c = t.chains.get(op.name);
      if (!c) throw new NftFakeError(`ENOENT: no chain ${op.name}`);
      if (c.rules.length) throw new NftFakeError(`EBUSY: chain ${op.name} still has ${c.rules.length} rule(s)`);
      const byRule = [...t.chains].filter(([, o]) => o.rules.some((r) => stmtChains(r).includes(op.name))).map(([n]) => `chain ${n}`);
      const byElem = [...t.sets].filter(([, s]) => [...s.elems.values()].some((e) => elemChain(e) === op.name)).map(([n]) => `map ${n}`);
      if (byRule.length + byElem.length) throw new NftFakeError(`EBUSY: chain ${op.name} is used by ${[...byRule, ...byElem].join(', ')}`);
      t.chains.delete(op.name);
      return;
    }
    case 'addRule': {
      const c = t.chains.get(op.chain);
      if (!c) throw new NftFakeError(`ENOENT: rule for missing chain ${op.chain}`);
      for (const ch of stmtChains(op.stmt)) if (!t.chains.has(ch)) throw new NftFakeError(`ENOENT: rule names missing chain ${ch}`);
      for (const [s, kind] of stmtSets(op.stmt)) {
        const set = t.sets.get(s);
        if (!set) throw new NftFakeError(`ENOENT: rule names missing set ${s}`);
        if (set.spec.kind !== kind) throw new NftFakeError(`EINVAL: rule uses set ${s} (${set.spec.kind}) as ${kind}`);
      }
      if (op.stmt.s === 'flowOffload' && !t.flowtables.has(op.stmt.flowtable)) throw new NftFakeError(`ENOENT: rule names missing flowtable ${op.stmt.flowtable}`);
      if (op.stmt.s === 'dnat' && famOfAddr(op.stmt.addr) !== fam) throw new NftFakeError(`EINVAL: dnat to ${op.stmt.addr} in family ${fam}`);
      for (const cidr of [op.stmt.s === 'srcCidr' ? op.stmt.cidr : null, op.stmt.s === 'classGoto' && typeof op.stmt.from === 'object' && 'cidr' in op.stmt.from ? op.stmt.from.cidr : null, op.stmt.s === 'vmapPort' ? op.stmt.daddrCidr ?? null : null]) {
        if (cidr && famOfAddr(cidr.split('/')[0]) !== fam) throw new NftFakeError(`EINVAL: CIDR ${cidr} in family ${fam}`);
      }
      c.rules.push(op.stmt);
      return;
    }
    case 'addElems':
    case 'addPacked': {
      const set = t.sets.get(op.set);
      if (!set) throw new NftFakeError(`ENOENT: elements for missing set ${op.set}`);
      for (const e of op.k === 'addPacked' ? op.elems.decode() : op.elems) {
        if (!ELEM_KIND[e.t].includes(set.spec.kind)) throw new NftFakeError(`EINVAL: ${e.t} element in ${set.spec.kind} ${op.set}`);
        for (const a of elemAddrs(e)) if (famOfAddr(a) !== fam) throw new NftFakeError(`EINVAL: address ${a} in family ${fam}`);
        const ch = elemChain(e);
        if (ch && !t.chains.has(ch)) throw new NftFakeError(`ENOENT: element of ${op.set} names missing chain ${ch}`);
        const k = elemKey(e);
        const cur = set.elems.get(k);
        if (cur && elemData(cur) !== elemData(e)) throw new NftFakeError(`EEXIST: element ${k} of ${op.set} exists with other data`);
        set.elems.set(k, e);
      }
      return;
    }
    case 'delElems': {
      const set = t.sets.get(op.set);
      if (!set) throw new NftFakeError(`ENOENT: element delete in missing set ${op.set}`);
      for (const e of op.elems) {
        const k = elemKey(e);
        if (!set.elems.delete(k)) throw new NftFakeError(`ENOENT: no element ${k} in ${op.set}`);
      }
      return;
    }
  }
}

/** What the kernel checks when a transaction commits: no loops, NAT statements reachable only from NAT hooks. */
function validate(t: FakeTable, fam: Fam): void {
  if (!t.exists) return;
  const edges = (name: string): string[] => {
    const c = t.chains.get(name)!;
    const out: string[] = [];
    for (const r of c.rules) {
      out.push(...stmtChains(r));
      for (const [s] of stmtSets(r)) for (const e of t.sets.get(s)?.elems.values() ?? []) { const ch = elemChain(e); if (ch) out.push(ch); }
    }
    return out;
  };
  for (const [name, chain] of t.chains) {
    if (!chain.spec.hook) continue;
    const hook = chain.spec.hook;
    const seen = new Set<string>();
    const walk = (n: string, path: string[]): void => {
      if (path.includes(n)) throw new NftFakeError(`ELOOP: ${fam} ${[...path, n].join(' -> ')}`);
      if (seen.has(n)) return;
      seen.add(n);
      for (const r of t.chains.get(n)!.rules) {
        const hooks = NAT_ONLY[r.s];
        if (hooks && (hook.type !== 'nat' || !hooks.includes(hook.hook as 'prerouting'))) {
          throw new NftFakeError(`EOPNOTSUPP: ${r.s} in chain ${n}, reachable from ${hook.type} ${hook.hook} chain ${name}`);
        }
      }
      for (const next of edges(n)) walk(next, [...path, n]);
    };
    walk(name, []);
  }
}

// ---------------------------------------------------------------------------------------------
// Normalised content, for comparing two tables that should hold the same ruleset.

export interface TableContent {
  sets: Record<string, { kind: SetKind; timeoutSec?: number; elems: string[] }>;
  chains: Record<string, { hook: ChainSpec['hook'] | null; rules: string[] }>;
}

/**
 * The table as a plain object where slot numbers do not matter: each pick map is compared by the
 * endpoints of each destination, whatever slot holds them.
 */
export function tableContent(t: FakeTable): TableContent {
  const out: TableContent = { sets: {}, chains: {} };
  for (const [name, c] of t.chains) out.chains[name] = { hook: c.spec.hook ?? null, rules: c.rules.map((r) => JSON.stringify(r)) };
  for (const [name, s] of [...t.sets].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    if (s.spec.kind === 'pickVipMap' || s.spec.kind === 'pickPortMap') {
      if (s.elems.size === 0) continue; // shards are created on first use and kept
      // Slot order does not matter: each destination's endpoints, with their slots' count.
      const byDest = new Map<string, string[]>();
      for (const e of s.elems.values()) {
        if (e.t !== 'pick') continue;
        const d = pickDest(e);
        byDest.set(d, [...(byDest.get(d) ?? []), `${e.i}`]);
      }
      out.sets[name] = {
        kind: s.spec.kind,
        elems: [...byDest].map(([d, slots]) => `${d}=${slots.length}:${[...s.elems.values()].filter((e) => e.t === 'pick' && pickDest(e) === d).map((e) => elemData(e)).sort().join(',')}`).sort(),
      };
      continue;
    }
    out.sets[name] = { kind: s.spec.kind, ...(s.spec.timeoutSec !== undefined ? { timeoutSec: s.spec.timeoutSec } : {}), elems: [...s.elems.keys()].map((k) => `${k}=${elemData(s.elems.get(k)!)}`).sort() };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The tracer.

export interface Packet {
  src: string;
  dst: string;
  dport: number;
  /** Default tcp. */
  proto?: L4;
  /** Default: from the destination address. */
  family?: Fam;
  /** `fib saddr type local`; default: the source is one of the tracer's local addresses. Also picks the path (output vs prerouting). */
  srcIsLocal?: boolean;
  /** `fib daddr type local` for the original destination; default: one of the tracer's local addresses. */
  dstIsLocal?: boolean;
  /** First packet of a connection (default true): NAT chains and `ct state new` rules see only those. */
  ctNew?: boolean;
  /** `meta iifname`: the interface the packet arrived on; default '' (none: a locally generated packet, or unknown). */
  iif?: string;
}

export type Verdict = 'DNAT' | 'DROP' | 'REJECT' | 'ACCEPT';

export interface Leaf {
  verdict: Verdict;
  /** "ip:port" for DNAT. */
  endpoint?: string;
  masqueraded: boolean;
  /** Rules that matched, "chain: rule", in order. */
  rules: string[];
  /** Affinity set updates this path performs. */
  updates: Array<{ set: string; addr: string }>;
}

export interface TraceResult {
  verdict: Verdict;
  /** Every endpoint the packet may be DNATed to (sorted), empty unless DNAT. */
  endpoints: string[];
  /** 'mixed' when some paths masquerade and others do not (e.g. hairpin to one of several endpoints). */
  masqueraded: boolean | 'mixed';
  leaves: Leaf[];
}

interface St {
  saddr: string; daddr: string; dport: number; proto: L4; ctNew: boolean;
  mark: number; dnat: string | null; masq: boolean;
  rules: string[]; updates: Array<{ set: string; addr: string }>;
}

type End = 'accept' | 'drop' | 'reject';
interface Out { st: St; end: End }
type Step =
  | { k: 'next'; st: St }
  | { k: 'jump' | 'goto'; chain: string; st: St }
  | { k: 'return'; st: St }
  | { k: 'end'; end: End; st: St };

type Hook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

export interface TracerOptions {
  /** The node's local addresses (`fib ... type local`); loopback is always local. */
  localAddrs: string[];
}

export class Tracer {
  private readonly local: Set<string>;

  constructor(readonly nft: FakeNft, opts: TracerOptions) {
    this.local = new Set(opts.localAddrs.map(canon));
  }

  isLocal(addr: string): boolean {
    return isLoopback(addr) || this.local.has(canon(addr));
  }

  /**
   * Where packet `p` goes. With `choose` (an endpoint "ip:port"), the affinity updates of the path
   * that reaches it are applied, as if that connection had been made.
   */
  trace(p: Packet, choose?: string): TraceResult {
    const fam = p.family ?? famOfAddr(p.dst);
    const t = this.nft.tables[fam];
    if (famOfAddr(p.src) !== fam || famOfAddr(p.dst) !== fam) throw new TraceError(`packet ${p.src} -> ${p.dst} is not of family ${fam}`);
    const st0: St = {
      saddr: p.src, daddr: p.dst, dport: p.dport, proto: p.proto ?? 'tcp', ctNew: p.ctNew ?? true,
      mark: 0, dnat: null, masq: false, rules: [], updates: [],
    };
    const srcLocal = p.srcIsLocal ?? this.isLocal(p.src);
    const dstLocal = (st: St): boolean => (st.dnat === null ? p.dstIsLocal ?? this.isLocal(p.dst) : this.isLocal(st.daddr));
    // A locally generated packet has no incoming interface (nft's iifname is all NULs then).
    const ctx: Ctx = { t, fam, srcLocal, iif: srcLocal ? '' : p.iif ?? '', dstLocal, isLocal: (a) => this.isLocal(a), now: this.nft.now, steps: 0 };

    let outs: Out[];
    if (!srcLocal) {
      // From a pod of this node or from elsewhere: prerouting, routing, input or forward, postrouting.
      outs = runHook(ctx, 'prerouting', [st0], true);
      outs = outs.flatMap((o) => {
        if (o.end !== 'accept') return [o];
        if (dstLocal(o.st)) return runHook(ctx, 'input', [o.st], true);
        return runHook(ctx, 'forward', [o.st], true).flatMap((f) => (f.end !== 'accept' ? [f] : runHook(ctx, 'postrouting', [f.st], true)));
      });
    } else {
      // From the node itself: output, postrouting; to a local address it comes back through lo
      // (prerouting without NAT, which conntrack has already bound, then input).
      outs = runHook(ctx, 'output', [st0], true);
      outs = outs.flatMap((o) => (o.end !== 'accept' ? [o] : runHook(ctx, 'postrouting', [o.st], true)));
      outs = outs.flatMap((o) => {
        if (o.end !== 'accept' || !dstLocal(o.st)) return [o];
        const again = runHook(ctx, 'prerouting', [o.st], false);
        return again.flatMap((a) => (a.end !== 'accept' ? [a] : runHook(ctx, 'input', [a.st], false)));
      });
    }

    const leaves: Leaf[] = outs.map((o) => ({
      verdict: o.end === 'drop' ? 'DROP' : o.end === 'reject' ? 'REJECT' : o.st.dnat ? 'DNAT' : 'ACCEPT',
      ...(o.end === 'accept' && o.st.dnat ? { endpoint: o.st.dnat } : {}),
      masqueraded: o.st.masq,
      rules: o.st.rules,
      updates: o.st.updates,
    }));
    const verdicts = [...new Set(leaves.map((l) => l.verdict))];
    if (verdicts.length !== 1) throw new TraceError(`paths disagree (${verdicts.join(', ')}):\n${explainLeaves(leaves)}`);
    const masqs = new Set(leaves.map((l) => l.masqueraded));
    const result: TraceResult = {
      verdict: verdicts[0],
      endpoints: [...new Set(leaves.flatMap((l) => (l.endpoint ? [l.endpoint] : [])))].sort(),
      masqueraded: masqs.size === 1 ? [...masqs][0] : 'mixed',
      leaves,
    };
    if (choose !== undefined) {
      const leaf = leaves.find((l) => l.endpoint === choose);
      if (!leaf) throw new TraceError(`no path reaches ${choose}:\n${explainLeaves(leaves)}`);
      for (const u of leaf.updates) {
        const set = t.sets.get(u.set)!;
        set.dynamic.set(canon(u.addr), this.nft.now + (set.spec.timeoutSec ?? 0));
      }
    }
    return result;
  }
}

export function explainLeaves(leaves: Leaf[]): string {
  return leaves.map((l, i) => `path ${i + 1}: ${l.verdict}${l.endpoint ? ` ${l.endpoint}` : ''}${l.masqueraded ? ' (masqueraded)' : ''}\n  ${l.rules.join('\n  ')}`).join('\n');
}

interface Ctx {
  t: FakeTable; fam: Fam; srcLocal: boolean; iif: string;
  dstLocal: (st: St) => boolean; isLocal: (a: string) => boolean;
  now: number; steps: number;
}

/** Every base chain of `hook`, by priority; NAT chains only for new connections not yet bound. */
function runHook(ctx: Ctx, hook: Hook, sts: St[], natAllowed: boolean): Out[] {
  const chains = [...ctx.t.chains].filter(([, c]) => c.spec.hook?.hook === hook).sort((a, b) => a[1].spec.hook!.priority - b[1].spec.hook!.priority);
  let outs: Out[] = sts.map((st) => ({ st, end: 'accept' }));
  for (const [name, c] of chains) {
    if (c.spec.hook!.type === 'nat' && !natAllowed) continue;
    outs = outs.flatMap((o) => {
      if (o.end !== 'accept') return [o];
      if (c.spec.hook!.type === 'nat' && !o.st.ctNew) return [o];
      return evalFrom(ctx, name, 0, [], o.st);
    });
  }
  return outs;
}

const clone = (st: St, rule?: string): St => ({ ...st, rules: rule ? [...st.rules, rule] : [...st.rules], updates: [...st.updates] });

function evalFrom(ctx: Ctx, chain: string, idx: number, stack: Array<{ chain: string; idx: number }>, st: St): Out[] {
  const c = ctx.t.chains.get(chain);
  if (!c) throw new TraceError(`chain ${chain} does not exist`);
  if (stack.length > 16) throw new TraceError(`jump stack too deep at ${chain}`);
  for (let i = idx; i < c.rules.length; i++) {
    if (++ctx.steps > 100000) throw new TraceError('trace does not terminate');
    const steps = evalRule(ctx, chain, c.rules[i], st);
    if (steps.length === 1 && steps[0].k === 'next') { st = steps[0].st; continue; }
    const outs: Out[] = [];
    for (const s of steps) {
      switch (s.k) {
        case 'next': outs.push(...evalFrom(ctx, chain, i + 1, stack, s.st)); break;
        case 'jump': outs.push(...evalFrom(ctx, s.chain, 0, [...stack, { chain, idx: i + 1 }], s.st)); break;
        case 'goto': outs.push(...evalFrom(ctx, s.chain, 0, stack, s.st)); break;
        case 'return': outs.push(...returnTo(ctx, stack, s.st)); break;
        case 'end': outs.push({ st: s.st, end: s.end }); break;
      }
    }
    return outs;
  }
  return returnTo(ctx, stack, st);
}

/** End of a chain or `return`: back to the last jump, or the base chain's policy (accept). */
function returnTo(ctx: Ctx, stack: Array<{ chain: string; idx: number }>, st: St): Out[] {
  if (stack.length === 0) return [{ st, end: 'accept' }];
  const top = stack[stack.length - 1];
  return evalFrom(ctx, top.chain, top.idx, stack.slice(0, -1), st);
}

function lookup(ctx: Ctx, set: string, key: string): Elem | undefined {
  const s = ctx.t.sets.get(set);
  if (!s) throw new TraceError(`set ${set} does not exist`);
  return s.elems.get(key);
}

/** nft's iifname test: the whole name, or (a "PREFIX*" pattern) its first bytes. */
const iifMatches = (iif: string, name: string, prefix: boolean): boolean => (prefix ? iif.startsWith(name) : iif === name);

function verdictStep(v: 'drop' | { goto: string }, st: St): Step {
  return v === 'drop' ? { k: 'end', end: 'drop', st } : { k: 'goto', chain: v.goto, st };
}

function evalRule(ctx: Ctx, chain: string, r: Stmt, st0: St): Step[] {
  const text = `${chain}: ${stmtText(ctx.fam, r)}`;
  const next: Step = { k: 'next', st: st0 };
  const hit = (): St => clone(st0, text);
  const ctNewOk = (want?: boolean): boolean => !want || st0.ctNew;
  switch (r.s) {
    case 'vmapVip': {
      if (!ctNewOk(r.ctNew)) return [next];
      const e = lookup(ctx, r.map, `${canon(st0.daddr)}|${st0.proto}|${st0.dport}`);
      return e && e.t === 'vip' ? [verdictStep(e.v, hit())] : [next];
    }
    case 'vmapPort': {
      if (!ctNewOk(r.ctNew)) return [next];
      if (r.local && !ctx.dstLocal(st0)) return [next];
      if (r.daddrCidr && !inCidr(st0.daddr, r.daddrCidr)) return [next];
      if (r.local && (!r.daddrCidr || r.exceptLoopback) && isLoopback(st0.daddr)) return [next];
      const e = lookup(ctx, r.map, `${st0.proto}|${st0.dport}`);
      return e && e.t === 'port' ? [verdictStep(e.v, hit())] : [next];
    }
    case 'jump': return [{ k: 'jump', chain: r.chain, st: hit() }];
    case 'goto': return [{ k: 'goto', chain: r.chain, st: hit() }];
    case 'iifReturn':
      return iifMatches(ctx.iif, r.iifname, r.prefix) ? [{ k: 'return', st: hit() }] : [next];
    case 'srcCidr':
      if (!inCidr(st0.saddr, r.cidr)) return [next];
      return [r.then === 'return' ? { k: 'return', st: hit() } : { k: 'goto', chain: r.then.goto, st: hit() }];
    case 'classGoto': {
      const match = r.from === 'any' ? true : r.from === 'local' ? ctx.srcLocal
        : 'cidr' in r.from ? inCidr(st0.saddr, r.from.cidr) : iifMatches(ctx.iif, r.from.iifname, r.from.prefix);
      if (!match) return [next];
      const st = hit();
      if (r.masq) st.mark |= MASQ_BIT;
      return [{ k: 'goto', chain: r.chain, st }];
    }
    case 'rejectDaddrInSet':
      if (!st0.ctNew || !lookup(ctx, r.set, canon(st0.daddr))) return [next];
      return [{ k: 'end', end: 'reject', st: hit() }];
    case 'dnatPick': {
      if (st0.proto !== r.proto) return [next];
      const dest = r.key === 'vip' ? `${canon(st0.daddr)}|${st0.proto}|${st0.dport}` : `${st0.proto}|${st0.dport}`;
      const steps: Step[] = [];
      for (let i = 0; i < r.n; i++) {
        const e = lookup(ctx, r.map, `${dest}|${i}`);
        // In the kernel a missing element makes the rule not match for that random value: a hole.
        if (!e || e.t !== 'pick') throw new TraceError(`${text}: slot ${i} of ${dest} missing in ${r.map}`);
        steps.push(dnatTo(hit(), e.epAddr, e.epPort));
      }
      return steps;
    }
    case 'dnat':
      if (st0.proto !== r.proto) return [next];
      return [dnatTo(hit(), r.addr, r.port)];
    case 'affinityGoto': {
      const set = ctx.t.sets.get(r.set)!;
      const exp = set.dynamic.get(canon(st0.saddr));
      const member = (exp !== undefined && exp > ctx.now) || set.elems.has(canon(st0.saddr));
      return member ? [{ k: 'goto', chain: r.chain, st: hit() }] : [next];
    }
    case 'randomGoto':
      return r.mod <= 1 ? [{ k: 'goto', chain: r.chain, st: hit() }] : [{ k: 'goto', chain: r.chain, st: hit() }, next];
    case 'affinityUpdate': {
      const st = hit();
      st.updates.push({ set: r.set, addr: st0.saddr });
      return [{ k: 'next', st }];
    }
    case 'drop': return [{ k: 'end', end: 'drop', st: hit() }];
    case 'rejectTcp': return st0.proto === 'tcp' ? [{ k: 'end', end: 'reject', st: hit() }] : [next];
    case 'rejectIcmp': return [{ k: 'end', end: 'reject', st: hit() }];
    case 'hairpinMasq': {
      if (!st0.dnat || canon(st0.saddr) !== canon(st0.daddr) || !lookup(ctx, 'hairpin', `${canon(st0.saddr)}|${canon(st0.daddr)}`)) return [next];
      const st = hit();
      st.masq = true;
      return [{ k: 'end', end: 'accept', st }];
    }
    case 'localnetMasq': {
      if (!st0.dnat || !inCidr(st0.saddr, '127.0.0.0/8')) return [next];
      const st = hit();
      st.masq = true;
      return [{ k: 'end', end: 'accept', st }];
    }
    case 'dropLocalnet':
      // Tracked packets (not new) and DNATed ones pass, as with ct state established,related / ct status dnat.
      if (!inCidr(st0.daddr, '127.0.0.0/8') || inCidr(st0.saddr, '127.0.0.0/8') || !st0.ctNew || st0.dnat) return [next];
      return [{ k: 'end', end: 'drop', st: hit() }];
    case 'returnIfNoMark': return (st0.mark & MASQ_BIT) === 0 ? [{ k: 'return', st: hit() }] : [next];
    case 'clearMark': { const st = hit(); st.mark ^= MASQ_BIT; return [{ k: 'next', st }]; }
    case 'masquerade': { const st = hit(); st.masq = true; return [{ k: 'end', end: 'accept', st }]; }
    // Offloading changes where later packets of the connection are handled, not their fate.
    case 'flowOffload': return [next];
  }
}

function dnatTo(st: St, addr: string, port: number): Step {
  st.dnat = hostPort(addr, port);
  st.daddr = addr;
  st.dport = port;
  return { k: 'end', end: 'accept', st };
}

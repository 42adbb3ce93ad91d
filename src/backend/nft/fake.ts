// A fake nftables kernel for tests of kpng and of code built on it, with its two seams: NftKernel (the
// nft backend's ops) and NftTransport (NftOp batches: the IPVS companion's, the aggregator's). Their
// failing variants are in faulty.ts.
//
// What the kernel holds is `ruleset`, the model of src/nft/ruleset.ts (the one the aggregator keeps
// its state in), which every batch changes, whichever seam it came through: the nft backend's ops are
// encoded by its own encoder (netlink.ts), as the native kernel seam encodes them. `dump()` is its
// sorted text.
//
// The nft backend's batches are also kept in its statements (`tables`, one table per family), because
// the packet tracer (test/helpers/nft-tracer.ts) walks statements, not expressions. The checks below
// read them, with the kernel's rules for a transaction: every op of a batch or none; a rule or element
// may only name chains and sets that exist; a chain or set still in use, a chain that still has rules,
// a missing element cannot be deleted; an element cannot be re-added with other data; NAT statements
// only run from NAT base chains; no jump loops. A refused transaction changes nothing and throws
// NftFakeError with the errno the kernel gives (ENOENT, EEXIST, EBUSY, EINVAL, ELOOP, EOPNOTSUPP). The
// idea follows knftables' fake; this part reads the backend's structured ops, so it needs no rule
// parser. It is checked against the kernel: test/e2e/nft-tracer-vs-kernel.test.ts lists what the addon
// put in the kernel for the same plan and compares it with these tables.
import type { NftKernel } from './sink';
import type { ChainSpec, Elem, IpFamily, FamOps, Op, SetKind, SetSpec, Stmt } from './types';
import { toNftOps } from './netlink';
import { applyOps, checkOps, dumpRuleset, type Ruleset } from '../../nft/ruleset';
import type { NftTransport } from '../../nft/transport';
import type { NftOp } from '../../native/nft-types';

/** A transaction the fake refuses, with the errno the kernel gives ("ENOENT: no set ...") and why. */
export class NftFakeError extends Error {}

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

/** The family an address belongs to. */
export const famOfAddr = (a: string): IpFamily => (addrBytes(a).length === 4 ? 'ip' : 'ip6');
/** One text per address (what the kernel compares: bytes). */
export const canon = (a: string): string => addrBytes(a).join('.');

/** Whether `addr` is inside `cidr` (a bare address: equal to it); families never match each other. */
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

// ---------------------------------------------------------------------------------------------
// The fake tables.

export interface FakeSet {
  spec: SetSpec;
  elems: Map<string, Elem>;
  /** Elements added by the datapath (affinity `update`): canonical address -> expiry (seconds). */
  dynamic: Map<string, number>;
}
export interface FakeChain { spec: ChainSpec; rules: Stmt[] }

/** One family's table: whether it exists, its sets, chains and flowtables. */
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

const ELEM_KIND: Record<Elem['type'], SetKind[]> = { vip: ['vipMap'], port: ['portMap'], pick: ['pickVipMap', 'pickPortMap'], pair: ['pairSet'], addr: ['addrSet', 'affinity'] };

/** The element's key as the kernel compares it. */
function elemKey(e: Elem): string {
  switch (e.type) {
    case 'vip': return `${canon(e.addr)}|${e.proto}|${e.port}`;
    case 'port': return `${e.proto}|${e.port}`;
    case 'pick': return `${pickDest(e)}|${e.slot}`;
    case 'pair': return `${canon(e.addr)}|${canon(e.addr)}`;
    case 'addr': return canon(e.addr);
  }
}

function elemData(e: Elem): string {
  switch (e.type) {
    case 'vip': case 'port': return JSON.stringify(e.verdict);
    case 'pick': return `${canon(e.epAddr)}|${e.epPort}`;
    default: return '';
  }
}

function elemAddrs(e: Elem): string[] {
  if (e.type === 'pick') return e.addr !== undefined ? [e.addr, e.epAddr] : [e.epAddr];
  return e.type === 'vip' || e.type === 'pair' || e.type === 'addr' ? [e.addr] : [];
}

/** The destination part of a pick element's key. */
const pickDest = (e: Extract<Elem, { type: 'pick' }>): string => (e.addr !== undefined ? `${canon(e.addr)}|${e.proto}|${e.port}` : `${e.proto}|${e.port}`);

/** Chains a rule names. */
export function stmtChains(st: Stmt): string[] {
  switch (st.type) {
    case 'jump': case 'goto': case 'classGoto': case 'affinityGoto': case 'randomGoto': return [st.chain];
    case 'srcCidr': return st.then === 'return' ? [] : [st.then.goto];
    default: return [];
  }
}

/** Sets a rule names, with the kind each must be. */
export function stmtSets(st: Stmt): Array<[string, SetKind]> {
  switch (st.type) {
    case 'vmapVip': return [[st.map, 'vipMap']];
    case 'vmapPort': return [[st.map, 'portMap']];
    case 'rejectDaddrInSet': return [[st.set, 'addrSet']];
    case 'dnatPick': return [[st.map, st.key === 'vip' ? 'pickVipMap' : 'pickPortMap']];
    case 'affinityGoto': case 'affinityUpdate': return [[st.set, 'affinity']];
    case 'hairpinMasq': return [['hairpin', 'pairSet']];
    default: return [];
  }
}

const elemChain = (e: Elem): string | null => ((e.type === 'vip' || e.type === 'port') && e.verdict !== 'drop' ? e.verdict.goto : null);

/** Statements that only NAT base chains may reach (the kernel refuses them elsewhere). */
const NAT_ONLY: Partial<Record<Stmt['type'], Array<'prerouting' | 'output' | 'postrouting'>>> = {
  dnatPick: ['prerouting', 'output'],
  dnat: ['prerouting', 'output'],
  masquerade: ['postrouting'],
  hairpinMasq: ['postrouting'],
  localnetMasq: ['postrouting'],
};

/** nftables in memory, changed by whole transactions as the kernel changes them. */
export class FakeNft {
  /** Every table the fake kernel holds, as the kernel holds it (any name, any family). */
  ruleset: Ruleset = new Map();
  /** The nft backend's tables (one per family, whatever their name) in its statements. */
  tables: Record<IpFamily, FakeTable> = { ip: new FakeTable(), ip6: new FakeTable() };
  /** The datapath's clock, in seconds (affinity timeouts). */
  now = 0;
  /** Batches applied. */
  batches = 0;

  /**
   * One atomic transaction of the nft backend's ops over both families of `table`: all ops or, on
   * the first error, none (the error is thrown).
   */
  apply(famOps: FamOps[], table = 'kpng'): void {
    const next: Record<IpFamily, FakeTable> = { ip: this.tables.ip.clone(), ip6: this.tables.ip6.clone() };
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
    this.commit(famOps.flatMap((f) => toNftOps(f.fam, table, f.ops)));
    this.tables = next;
  }

  applyOps(fam: IpFamily, ops: Op[]): void {
    this.apply([{ fam, ops }]);
  }

  /** One atomic transaction of NftOps: all or, when one names what does not exist, none (thrown). */
  applyNft(ops: NftOp[]): void {
    this.commit(ops);
  }

  /** The ruleset as sorted text (dumpRuleset). */
  dump(): string {
    return dumpRuleset(this.ruleset);
  }

  private commit(ops: NftOp[]): void {
    const bad = checkOps(this.ruleset, ops);
    if (bad) throw new NftFakeError(`${/not (exist|declared)/.test(bad.reason) ? 'ENOENT' : 'EOPNOTSUPP'}: op #${bad.index}: ${bad.reason}`);
    applyOps(this.ruleset, ops);
    this.batches++;
  }
}

function applyOp(t: FakeTable, fam: IpFamily, op: Op): void {
  if (op.kind === 'resetTable') {
    // Add, delete and add again: a new, empty table.
    t.exists = true;
    t.sets = new Map();
    t.chains = new Map();
    t.flowtables = new Map();
    return;
  }
  if (op.kind === 'addTable') {
    t.exists = true;
    return;
  }
  if (!t.exists) throw new NftFakeError('ENOENT: no such table');
  switch (op.kind) {
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
      const users = [...t.chains].filter(([, c]) => c.rules.some((r) => r.type === 'flowOffload' && r.flowtable === op.name)).map(([n]) => n);
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
      if (op.stmt.type === 'flowOffload' && !t.flowtables.has(op.stmt.flowtable)) throw new NftFakeError(`ENOENT: rule names missing flowtable ${op.stmt.flowtable}`);
      if (op.stmt.type === 'dnat' && famOfAddr(op.stmt.addr) !== fam) throw new NftFakeError(`EINVAL: dnat to ${op.stmt.addr} in family ${fam}`);
      for (const cidr of [op.stmt.type === 'srcCidr' ? op.stmt.cidr : null, op.stmt.type === 'classGoto' && typeof op.stmt.from === 'object' && 'cidr' in op.stmt.from ? op.stmt.from.cidr : null, op.stmt.type === 'vmapPort' ? op.stmt.daddrCidr ?? null : null]) {
        if (cidr && famOfAddr(cidr.split('/')[0]) !== fam) throw new NftFakeError(`EINVAL: CIDR ${cidr} in family ${fam}`);
      }
      c.rules.push(op.stmt);
      return;
    }
    case 'addElems':
    case 'addPacked': {
      const set = t.sets.get(op.set);
      if (!set) throw new NftFakeError(`ENOENT: elements for missing set ${op.set}`);
      for (const e of op.kind === 'addPacked' ? op.elems.decode() : op.elems) {
        if (!ELEM_KIND[e.type].includes(set.spec.kind)) throw new NftFakeError(`EINVAL: ${e.type} element in ${set.spec.kind} ${op.set}`);
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
function validate(t: FakeTable, fam: IpFamily): void {
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
        const hooks = NAT_ONLY[r.type];
        if (hooks && (hook.type !== 'nat' || !hooks.includes(hook.hook as 'prerouting'))) {
          throw new NftFakeError(`EOPNOTSUPP: ${r.type} in chain ${n}, reachable from ${hook.type} ${hook.hook} chain ${name}`);
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
        if (e.type !== 'pick') continue;
        const d = pickDest(e);
        byDest.set(d, [...(byDest.get(d) ?? []), `${e.slot}`]);
      }
      out.sets[name] = {
        kind: s.spec.kind,
        elems: [...byDest].map(([d, slots]) => `${d}=${slots.length}:${[...s.elems.values()].filter((e) => e.type === 'pick' && pickDest(e) === d).map((e) => elemData(e)).sort().join(',')}`).sort(),
      };
      continue;
    }
    out.sets[name] = { kind: s.spec.kind, ...(s.spec.timeoutSec !== undefined ? { timeoutSec: s.spec.timeoutSec } : {}), elems: [...s.elems.keys()].map((k) => `${k}=${elemData(s.elems.get(k)!)}`).sort() };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The seam.

/** An NftKernel over a FakeNft: every batch applied atomically (or refused whole), conntrack deletes counted as done. */
export function fakeNftKernel(fake: FakeNft): NftKernel {
  return {
    async apply(table, famOps) {
      fake.apply(famOps, table);
      return { messages: famOps.reduce((n, f) => n + f.ops.length, 0), bytes: 0, ms: 0 };
    },
    async conntrackDelete(filters) { return filters.length; },
  };
}

/** An NftTransport over a FakeNft: every batch applied atomically (or refused whole). */
export function fakeNftTransport(fake: FakeNft): NftTransport {
  return {
    async apply(ops) {
      fake.applyNft(ops);
      return { messages: ops.length + 2, bytes: 0, ms: 0, encodeMs: 0 };
    },
  };
}

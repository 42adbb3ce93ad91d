// nftables in memory, with the kernel's meaning: tables, each with chains (ordered rule lists), sets
// and maps (elements by key) and flowtables, changed by NftOps (the addon's netlink vocabulary) as the
// kernel changes them. kpng's one such model: the aggregator keeps each producer's desired and applied
// state in it (replaying the committed ops on `applied` keeps it equal to what the kernel has), and
// FakeNft (src/backend/nft/fake.ts) is a kernel over it, for tests and library users.
//
// Objects handed in are kept by reference and never mutated here: callers must not mutate them later.
import type { NftChain, NftElement, NftFlowtable, NftOp, NftRule, NftSet, NftTable } from '../native/nft-types';

export interface ChainState { chain: NftChain; rules: NftRule[] }
export interface SetState { set: NftSet; elements: Map<string, NftElement> }
export interface TableState {
  table: NftTable;
  chains: Map<string, ChainState>;
  sets: Map<string, SetState>;
  /** Flowtables by name (the aggregator refuses them: only FakeNft's tables hold any). */
  flowtables: Map<string, NftFlowtable>;
}
/** Tables by `tableKey`. */
export type Ruleset = Map<string, TableState>;

export const tableKey = (family: string, name: string): string => `${family} ${name}`;

const hex = (b: Uint8Array | undefined): string => (b ? Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex') : '');

/** An element's identity in its set: key, range end, interval-end flag. */
export const elementKey = (e: NftElement): string => `${hex(e.key)}/${hex(e.keyEnd)}${e.intervalEnd ? '!' : ''}`;

/** Which kind of object an op is about, and its table. */
export function opTable(o: NftOp): { family: string; table: string } {
  if ('table' in o) return { family: o.table.family, table: o.table.name };
  if ('chain' in o) return { family: o.chain.family, table: o.chain.table };
  if ('set' in o) return { family: o.set.family, table: o.set.table };
  if ('elements' in o) return { family: o.elements.family, table: o.elements.table };
  if ('flowtable' in o) return { family: o.flowtable.family, table: o.flowtable.table };
  return { family: o.rule.family, table: o.rule.table };
}

/**
 * Checks an op list against a state without changing it: parents exist when children are added,
 * no rule handles/positions (rules are ordered lists here), no transaction-local set ids (they would
 * collide between producers sharing a batch). `refuse` adds the caller's own rule for an op inside an
 * existing table (the aggregator's: no flowtables). Returns the reason and op index of the first problem.
 */
export function checkOps(state: Ruleset, ops: NftOp[], refuse?: (o: NftOp) => string | undefined): { index: number; reason: string } | undefined {
  // Existence overlay: key -> present after the ops so far (absent from the map: ask the state).
  const tables = new Map<string, boolean>();
  const chains = new Map<string, boolean>();
  const sets = new Map<string, boolean>();
  const flowtables = new Map<string, boolean>();
  const hasTable = (k: string) => tables.get(k) ?? state.has(k);
  const has = (overlay: Map<string, boolean>, tk: string, name: string, pick: (t: TableState) => Map<string, unknown>) => {
    const k = `${tk} ${name}`;
    const v = overlay.get(k);
    if (v !== undefined) return v;
    if (tables.get(tk) === false || tables.has(tk)) return false; // table deleted or (re)created in these ops
    const t = state.get(tk);
    return !!t && pick(t).has(name);
  };
  for (let i = 0; i < ops.length; i++) {
    const o = ops[i];
    const { family, table } = opTable(o);
    const tk = tableKey(family, table);
    if ('table' in o) {
      if (o.op === 'add' || o.op === 'create') {
        if (!hasTable(tk)) {
          tables.set(tk, true);
          for (const m of [chains, sets, flowtables]) for (const k of [...m.keys()]) if (k.startsWith(`${tk} `)) m.delete(k);
        }
      } else if (o.op === 'delete' || o.op === 'destroy') {
        if (o.op === 'delete' && !hasTable(tk)) return { index: i, reason: `table ${family} ${table} does not exist` };
        tables.set(tk, false);
        for (const m of [chains, sets, flowtables]) for (const k of [...m.keys()]) if (k.startsWith(`${tk} `)) m.delete(k);
      } else if (!hasTable(tk)) return { index: i, reason: `table ${family} ${table} does not exist` };
      continue;
    }
    if (!hasTable(tk)) return { index: i, reason: `table ${family} ${table} is not declared` };
    const refused = refuse?.(o);
    if (refused) return { index: i, reason: refused };
    if ('chain' in o) {
      const present = has(chains, tk, o.chain.name, (t) => t.chains);
      if (o.op === 'add' || o.op === 'create') chains.set(`${tk} ${o.chain.name}`, true);
      else if (!present && o.op !== 'destroy') return { index: i, reason: `chain ${o.chain.name} does not exist in table ${family} ${table}` };
      else if (o.op !== 'flush') chains.set(`${tk} ${o.chain.name}`, false);
    } else if ('set' in o) {
      if (o.set.id !== undefined) return { index: i, reason: `set ${o.set.name}: transaction-local set ids are not supported here: name the set` };
      const present = has(sets, tk, o.set.name, (t) => t.sets);
      if (o.op === 'add' || o.op === 'create') sets.set(`${tk} ${o.set.name}`, true);
      else if (!present && o.op !== 'destroy') return { index: i, reason: `set ${o.set.name} does not exist in table ${family} ${table}` };
      else if (o.op !== 'flush') sets.set(`${tk} ${o.set.name}`, false);
    } else if ('elements' in o) {
      if (o.elements.setId !== undefined) return { index: i, reason: 'elements by set id are not supported here: name the set' };
      if (!has(sets, tk, o.elements.set, (t) => t.sets)) return { index: i, reason: `set ${o.elements.set} does not exist in table ${family} ${table}` };
    } else if ('flowtable' in o) {
      const present = has(flowtables, tk, o.flowtable.name, (t) => t.flowtables);
      if (o.op === 'add' || o.op === 'create') flowtables.set(`${tk} ${o.flowtable.name}`, true);
      else if (!present && o.op !== 'destroy') return { index: i, reason: `flowtable ${o.flowtable.name} does not exist in table ${family} ${table}` };
      else flowtables.set(`${tk} ${o.flowtable.name}`, false);
    } else {
      const r = o.rule;
      if (o.op !== 'add' && o.op !== 'insert') return { index: i, reason: `rule ${o.op}: rules have no handles here; change the chain's rule list instead` };
      if (r.handle !== undefined || r.position !== undefined) return { index: i, reason: 'rule handles and positions are not supported here: rules are ordered lists' };
      for (const x of r.exprs) {
        if ((x.type === 'lookup' || x.type === 'dynset') && x.setId !== undefined) return { index: i, reason: 'set ids in rules are not supported here: name the set' };
      }
      if (!has(chains, tk, r.chain, (t) => t.chains)) return { index: i, reason: `chain ${r.chain} does not exist in table ${family} ${table}` };
    }
  }
  return undefined;
}

/** Replays ops on a state with the kernel's meaning. Call `checkOps` first: a bad reference throws. */
export function applyOps(state: Ruleset, ops: NftOp[]): void {
  for (const o of ops) applyOp(state, o);
}

function mustTable(state: Ruleset, family: string, name: string): TableState {
  const t = state.get(tableKey(family, name));
  if (!t) throw new Error(`table ${family} ${name} does not exist`);
  return t;
}

function applyOp(state: Ruleset, o: NftOp): void {
  if ('table' in o) {
    const k = tableKey(o.table.family, o.table.name);
    const t = state.get(k);
    switch (o.op) {
      case 'add': case 'create':
        if (!t) state.set(k, { table: o.table, chains: new Map(), sets: new Map(), flowtables: new Map() });
        else if (o.table.dormant !== undefined && o.table.dormant !== t.table.dormant) t.table = { ...t.table, dormant: o.table.dormant };
        return;
      case 'delete': case 'destroy': state.delete(k); return;
      case 'flush': if (t) for (const c of t.chains.values()) c.rules = []; return;
    }
    return;
  }
  if ('chain' in o) {
    const t = mustTable(state, o.chain.family, o.chain.table);
    const c = t.chains.get(o.chain.name);
    switch (o.op) {
      case 'add': case 'create':
        if (!c) t.chains.set(o.chain.name, { chain: o.chain, rules: [] });
        else if (o.chain.hook || o.chain.policy) c.chain = o.chain; // a base chain's update (policy)
        return;
      case 'delete': case 'destroy': t.chains.delete(o.chain.name); return;
      case 'flush': if (c) c.rules = []; return;
    }
    return;
  }
  if ('set' in o) {
    const t = mustTable(state, o.set.family, o.set.table);
    const s = t.sets.get(o.set.name);
    switch (o.op) {
      case 'add': case 'create': if (!s) t.sets.set(o.set.name, { set: o.set, elements: new Map() }); return;
      case 'delete': case 'destroy': t.sets.delete(o.set.name); return;
      case 'flush': if (s) s.elements = new Map(); return;
    }
    return;
  }
  if ('elements' in o) {
    const s = mustTable(state, o.elements.family, o.elements.table).sets.get(o.elements.set);
    if (!s) throw new Error(`set ${o.elements.set} does not exist`);
    if (o.op === 'add' || o.op === 'create') for (const e of o.elements.elements) s.elements.set(elementKey(e), e);
    else for (const e of o.elements.elements) s.elements.delete(elementKey(e));
    return;
  }
  if ('flowtable' in o) {
    const t = mustTable(state, o.flowtable.family, o.flowtable.table);
    const f = t.flowtables.get(o.flowtable.name);
    // As the kernel: adding an existing flowtable adds the devices it lacks.
    if (o.op === 'add' || o.op === 'create') t.flowtables.set(o.flowtable.name, f ? { ...f, devices: [...new Set([...f.devices, ...o.flowtable.devices])] } : o.flowtable);
    else t.flowtables.delete(o.flowtable.name);
    return;
  }
  const c = mustTable(state, o.rule.family, o.rule.table).chains.get(o.rule.chain);
  if (!c) throw new Error(`chain ${o.rule.chain} does not exist`);
  // Each model creates its own rule arrays (chain creation, flush), so they are never shared.
  if (o.op === 'add') c.rules.push(o.rule);
  else if (o.op === 'insert') c.rules.unshift(o.rule);
}

/** Objects and elements in a state (debug view). */
export function countObjects(state: Ruleset): { tables: number; chains: number; sets: number; rules: number; elements: number } {
  const n = { tables: 0, chains: 0, sets: 0, rules: 0, elements: 0 };
  for (const t of state.values()) {
    n.tables++;
    for (const c of t.chains.values()) { n.chains++; n.rules += c.rules.length; }
    for (const s of t.sets.values()) { n.sets++; n.elements += s.elements.size; }
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// A sorted dump, for comparing two rulesets and for golden files.

const bytesAsHex = (_k: string, v: unknown): unknown => (v instanceof Uint8Array ? hex(v) : v);
const json = (v: unknown): string => JSON.stringify(v, bytesAsHex);
const byName = <T>(m: Map<string, T>): Array<[string, T]> => [...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

/**
 * The ruleset as text, the same for the same content whatever order it was made in: tables, chains,
 * sets and flowtables by name, elements by key, rules in their chain's order (that order matters).
 */
export function dumpRuleset(state: Ruleset): string {
  const out: string[] = [];
  for (const [k, t] of byName(state)) {
    out.push(`table ${k}${t.table.dormant ? ' dormant' : ''}`);
    for (const [name, f] of byName(t.flowtables)) out.push(`  flowtable ${name} devices ${[...f.devices].sort().join(',')}`);
    for (const [name, c] of byName(t.chains)) {
      const { family: _f, table: _t, name: _n, ...spec } = c.chain;
      out.push(`  chain ${name} ${json(spec)}`);
      for (const r of c.rules) out.push(`    rule ${json(r.exprs)}${r.comment ? ` # ${r.comment}` : ''}`);
    }
    for (const [name, s] of byName(t.sets)) {
      const { family: _f, table: _t, name: _n, ...spec } = s.set;
      out.push(`  set ${name} ${json(spec)}`);
      for (const [key, e] of byName(s.elements)) {
        const { key: _k, keyEnd: _e, intervalEnd: _i, ...value } = e;
        out.push(`    element ${key}${Object.keys(value).length ? ` : ${json(value)}` : ''}`);
      }
    }
  }
  return out.join('\n');
}

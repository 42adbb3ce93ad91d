// The ops that turn one producer's applied state into its desired state, for the tables that
// changed. Chains whose rule list changed are flushed and refilled (rules have no identity but their
// position); elements are added/removed by key; a table whose own, a chain's or a set's definition
// changed is replaced as a whole (add, delete, add: no window without rules, one transaction).
import { pushAll } from '../util/push-all';
import type { NftElement, NftOp } from '../native/nft-types';
import type { Ruleset, TableState } from '../nft/ruleset';

const fingerprints = new WeakMap<object, string>();

/** A stable text of an object: sorted keys, bytes as hex. Cached per object (objects are immutable). */
export function fingerprint(x: object): string {
  let f = fingerprints.get(x);
  if (f === undefined) {
    f = stable(x);
    fingerprints.set(x, f);
  }
  return f;
}

function stable(v: unknown): string {
  if (v === undefined) return 'u';
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (v instanceof Uint8Array) return `x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}`;
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${k}:${stable(o[k])}`).join(',')}}`;
}

const same = (a: object, b: object): boolean => a === b || fingerprint(a) === fingerprint(b);

function rulesEqual(a: object[], b: object[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!same(a[i], b[i])) return false;
  return true;
}

/** Creates a table from nothing, replacing whatever the kernel has under its name. */
export function replaceTableOps(t: TableState): NftOp[] {
  const { family, name } = t.table;
  const ops: NftOp[] = [
    { op: 'add', table: { family, name } },
    { op: 'delete', table: { family, name } },
    { op: 'add', table: t.table },
  ];
  for (const c of t.chains.values()) ops.push({ op: 'add', chain: c.chain });
  for (const s of t.sets.values()) {
    ops.push({ op: 'add', set: s.set });
    if (s.elements.size) ops.push({ op: 'add', elements: { family, table: name, set: s.set.name, elements: [...s.elements.values()] } });
  }
  for (const c of t.chains.values()) for (const r of c.rules) ops.push({ op: 'add', rule: r });
  return ops;
}

/** Deletes a table the kernel may or may not have (add first, so the delete cannot fail). */
export function removeTableOps(family: TableState['table']['family'], name: string): NftOp[] {
  return [{ op: 'add', table: { family, name } }, { op: 'delete', table: { family, name } }];
}

/** True when an in-place update cannot reach `want` from `have` (a definition changed). */
function needsReplace(have: TableState, want: TableState, scope: Scope): boolean {
  if (scope === 'all' && !same(have.table, want.table)) return true;
  const chains = scope === 'all' ? want.chains.keys() : scope.chains;
  const sets = scope === 'all' ? want.sets.keys() : scope.sets;
  for (const n of chains) {
    const h = have.chains.get(n);
    const c = want.chains.get(n);
    if (h && c && !same(h.chain, c.chain)) return true;
  }
  for (const n of sets) {
    const h = have.sets.get(n);
    const s = want.sets.get(n);
    if (h && s && !same(h.set, s.set)) return true;
  }
  return false;
}

/** In-place ops for one table present in both states with the same definitions, limited to `scope`. */
function updateTableOps(have: TableState, want: TableState, scope: Scope): NftOp[] {
  const { family, name: table } = want.table;
  const chainNames = scope === 'all' ? new Set([...have.chains.keys(), ...want.chains.keys()]) : scope.chains;
  const setNames = scope === 'all' ? new Set([...have.sets.keys(), ...want.sets.keys()]) : scope.sets;
  const ops: NftOp[] = [];
  const refill: string[] = [];
  for (const n of chainNames) { const c = want.chains.get(n); if (c && !have.chains.has(n)) ops.push({ op: 'add', chain: c.chain }); }
  for (const n of setNames) { const s = want.sets.get(n); if (s && !have.sets.has(n)) ops.push({ op: 'add', set: s.set }); }
  // Flush first: a rule going away may be what references a chain or set deleted below.
  for (const n of chainNames) {
    const h = have.chains.get(n);
    const w = want.chains.get(n);
    if (!h) { if (w?.rules.length) refill.push(n); continue; }
    if (!w) { if (h.rules.length) ops.push({ op: 'flush', chain: h.chain }); continue; }
    if (!rulesEqual(h.rules, w.rules)) {
      if (h.rules.length) ops.push({ op: 'flush', chain: h.chain });
      refill.push(n);
    }
  }
  for (const n of setNames) {
    const s = want.sets.get(n);
    if (!s) continue;
    const h = have.sets.get(n);
    const del: NftElement[] = [];
    const add: NftElement[] = [];
    if (h) {
      for (const [k, e] of h.elements) {
        const w = s.elements.get(k);
        if (!w || !same(w, e)) del.push(e);
      }
      for (const [k, e] of s.elements) {
        const g = h.elements.get(k);
        if (!g || !same(g, e)) add.push(e);
      }
    } else pushAll(add, s.elements.values());
    if (del.length) ops.push({ op: 'delete', elements: { family, table, set: n, elements: del } });
    if (add.length) ops.push({ op: 'add', elements: { family, table, set: n, elements: add } });
  }
  for (const n of refill) for (const r of want.chains.get(n)!.rules) ops.push({ op: 'add', rule: r });
  for (const n of chainNames) { const h = have.chains.get(n); if (h && !want.chains.has(n)) ops.push({ op: 'delete', chain: h.chain }); }
  for (const n of setNames) { const h = have.sets.get(n); if (h && !want.sets.has(n)) ops.push({ op: 'delete', set: h.set }); }
  return ops;
}

/** What changed in a table: everything, or these chains (rules) and sets (definition, elements). */
export type Scope = 'all' | { chains: Set<string>; sets: Set<string> };

export interface DiffOptions {
  /** Only these tables (keys), each limited to a scope; all tables of both states, whole, when absent. */
  tables?: Map<string, Scope> | Iterable<string>;
  /** Replace these tables as a whole even if unchanged (a full resync of them). */
  replace?: Set<string>;
}

/** The ops that bring `applied` to `desired`. */
export function diffStates(applied: Ruleset, desired: Ruleset, opts: DiffOptions = {}): NftOp[] {
  const scopes = new Map<string, Scope>();
  if (opts.tables instanceof Map) for (const [k, v] of opts.tables) scopes.set(k, v);
  else for (const k of opts.tables ?? new Set([...applied.keys(), ...desired.keys()])) scopes.set(k, 'all');
  for (const k of opts.replace ?? []) scopes.set(k, 'all');
  const ops: NftOp[] = [];
  for (const [k, scope] of scopes) {
    const have = applied.get(k);
    const want = desired.get(k);
    if (!want) {
      if (have) pushAll(ops, removeTableOps(have.table.family, have.table.name));
      else if (opts.replace?.has(k)) {
        const [family, name] = k.split(' ') as [TableState['table']['family'], string];
        pushAll(ops, removeTableOps(family, name));
      }
      continue;
    }
    if (!have || opts.replace?.has(k) || needsReplace(have, want, scope)) pushAll(ops, replaceTableOps(want));
    else pushAll(ops, updateTableOps(have, want, scope));
  }
  return ops;
}

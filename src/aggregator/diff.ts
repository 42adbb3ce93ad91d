// The ops that turn one producer's applied state into its desired state, for the tables that
// changed. Chains whose rule list changed are flushed and refilled (rules have no identity but their
// position); elements are added/removed by key; a table whose own, a chain's or a set's definition
// changed is replaced as a whole (add, delete, add: no window without rules, one transaction).
import type { NftElement, NftOp } from '../native/nft-types';
import { elementKey, type ProducerState, type TableState } from './state';

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
function needsReplace(have: TableState, want: TableState): boolean {
  if (!same(have.table, want.table)) return true;
  for (const [n, c] of want.chains) {
    const h = have.chains.get(n);
    if (h && !same(h.chain, c.chain)) return true;
  }
  for (const [n, s] of want.sets) {
    const h = have.sets.get(n);
    if (h && !same(h.set, s.set)) return true;
  }
  return false;
}

/** In-place ops for one table present in both states with the same definitions. */
function updateTableOps(have: TableState, want: TableState): NftOp[] {
  const { family, name: table } = want.table;
  const ops: NftOp[] = [];
  const refill: string[] = [];
  for (const [n, c] of want.chains) if (!have.chains.has(n)) ops.push({ op: 'add', chain: c.chain });
  for (const [n, s] of want.sets) if (!have.sets.has(n)) ops.push({ op: 'add', set: s.set });
  // Flush first: a rule going away may be what references a chain or set deleted below.
  for (const [n, h] of have.chains) {
    const w = want.chains.get(n);
    if (!w) { if (h.rules.length) ops.push({ op: 'flush', chain: h.chain }); continue; }
    if (!rulesEqual(h.rules, w.rules)) {
      if (h.rules.length) ops.push({ op: 'flush', chain: h.chain });
      refill.push(n);
    }
  }
  for (const [n, w] of want.chains) if (!have.chains.has(n) && w.rules.length) refill.push(n);
  for (const [n, s] of want.sets) {
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
    } else add.push(...s.elements.values());
    if (del.length) ops.push({ op: 'delete', elements: { family, table, set: n, elements: del } });
    if (add.length) ops.push({ op: 'add', elements: { family, table, set: n, elements: add } });
  }
  for (const n of refill) for (const r of want.chains.get(n)!.rules) ops.push({ op: 'add', rule: r });
  for (const [n, h] of have.chains) if (!want.chains.has(n)) ops.push({ op: 'delete', chain: h.chain });
  for (const [n, h] of have.sets) if (!want.sets.has(n)) ops.push({ op: 'delete', set: h.set });
  return ops;
}

export interface DiffOptions {
  /** Only these tables (keys); all tables of both states when absent. */
  tables?: Iterable<string>;
  /** Replace these tables as a whole even if unchanged (a full resync of them). */
  replace?: Set<string>;
}

/** The ops that bring `applied` to `desired`. */
export function diffStates(applied: ProducerState, desired: ProducerState, opts: DiffOptions = {}): NftOp[] {
  const keys = opts.tables ? new Set(opts.tables) : new Set([...applied.keys(), ...desired.keys()]);
  for (const k of opts.replace ?? []) keys.add(k);
  const ops: NftOp[] = [];
  for (const k of keys) {
    const have = applied.get(k);
    const want = desired.get(k);
    if (!want) {
      if (have) ops.push(...removeTableOps(have.table.family, have.table.name));
      else if (opts.replace?.has(k)) {
        const [family, name] = k.split(' ') as [TableState['table']['family'], string];
        ops.push(...removeTableOps(family, name));
      }
      continue;
    }
    if (!have || opts.replace?.has(k) || needsReplace(have, want)) ops.push(...replaceTableOps(want));
    else ops.push(...updateTableOps(have, want));
  }
  return ops;
}

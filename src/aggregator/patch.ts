// Incremental changes to a producer's objects, for producers that should not resend everything
// (a deny list of 100k addresses gaining one): two objects documents, applied to what the producer
// declared so far.
//
//   set:     objects to add or update. A table adds the table; a chain adds it, and replaces its
//            rule list when the chain has `rules`; a set adds it (an existing set may leave out its
//            type: its definition stays) and adds the listed elements.
//   delete:  objects to remove, by name. A table with neither chains nor sets deletes the table; a
//            chain deletes the chain; a set with `elements` deletes those elements, without deletes
//            the set.
//
// Deletes apply first, then sets. The aggregator diffs the result against what the kernel has, so
// deleting an element that is not there, or setting one that is, changes nothing.
import type { NftFamily, NftOp, NftSet } from '../native/nft-types';
import { list, obj, ObjectsError, parseObjects, setElements, str } from './objects';
import { tableKey, type Ruleset } from '../nft/ruleset';

export interface Patch { set?: unknown; delete?: unknown }

const INTERVAL_PATCH = 'the ranges of an existing interval set change as a whole list: delete the set and set it again in one patch, or declare';

/** The NftOps of a patch against `desired` (the producer's declared state). Throws ObjectsError. */
export function parsePatch(patch: Patch, desired: Ruleset): NftOp[] {
  const dels = deleteOps(patch.delete, desired);
  // What the sets part builds on: the declared state without what the deletes remove.
  const gone = new Set<string>();
  for (const o of dels) {
    if ('table' in o) gone.add(tableKey(o.table.family, o.table.name));
    else if ('set' in o) gone.add(`${tableKey(o.set.family, o.set.table)} ${o.set.name}`);
  }
  const base = (family: string, table: string) => (gone.has(tableKey(family, table)) ? undefined : desired.get(tableKey(family, table)));
  const existingSet = (family: string, table: string, set: string): NftSet | undefined =>
    (gone.has(`${tableKey(family, table)} ${set}`) ? undefined : base(family, table)?.sets.get(set)?.set);
  return [...dels, ...setOps(patch.set, base, existingSet)];
}

function tables(doc: unknown, at: string): { t: Record<string, unknown>; at: string; family: NftFamily; name: string }[] {
  if (doc === undefined || doc === null) return [];
  const root = obj(doc, at);
  for (const k of Object.keys(root)) if (k !== 'tables') throw new ObjectsError(`${at}.${k}`, 'unknown field (the document has `tables`)');
  return list(root.tables, `${at}.tables`).map((tv, i) => {
    const tat = `${at}.tables[${i}]`;
    const t = obj(tv, tat);
    return { t, at: tat, family: str(t.family, `${tat}.family`) as NftFamily, name: str(t.name, `${tat}.name`) };
  });
}

function deleteOps(doc: unknown, desired: Ruleset): NftOp[] {
  const ops: NftOp[] = [];
  for (const { t, at, family, name } of tables(doc, 'delete')) {
    const have = desired.get(tableKey(family, name));
    if (!have) throw new ObjectsError(at, `table ${family} ${name} is not declared by this producer`);
    if (t.chains === undefined && t.sets === undefined) { ops.push({ op: 'delete', table: { family, name } }); continue; }
    list(t.chains, `${at}.chains`).forEach((cv, i) => {
      const cat = `${at}.chains[${i}]`;
      const cname = str(obj(cv, cat).name, `${cat}.name`);
      const c = have.chains.get(cname);
      if (!c) throw new ObjectsError(`${cat}.name`, `no chain ${cname} in table ${family} ${name}`);
      ops.push({ op: 'delete', chain: c.chain });
    });
    list(t.sets, `${at}.sets`).forEach((sv, i) => {
      const sat = `${at}.sets[${i}]`;
      const s = obj(sv, sat);
      const sname = str(s.name, `${sat}.name`);
      const cur = have.sets.get(sname);
      if (!cur) throw new ObjectsError(`${sat}.name`, `no set ${sname} in table ${family} ${name}`);
      if (s.elements === undefined) { ops.push({ op: 'delete', set: cur.set }); return; }
      if (cur.set.flags?.interval) {
        throw new ObjectsError(`${sat}.elements`, INTERVAL_PATCH);
      }
      const elements = setElements(cur.set, list(s.elements, `${sat}.elements`), sat);
      if (elements.length) ops.push({ op: 'delete', elements: { family, table: name, set: sname, elements } });
    });
  }
  return ops;
}

/** An existing set's definition as a document's set fields (so a patch may leave them out). */
function setFields(s: NftSet): Record<string, unknown> {
  return {
    type: s.keyType, ...(s.keyLen !== undefined ? { keyLen: s.keyLen } : {}), ...(s.dataType !== undefined ? { data: s.dataType } : {}),
    ...(s.timeout !== undefined ? { timeout: s.timeout } : {}), ...(s.flags?.interval ? { flags: ['interval'] } : {}),
  };
}

function setOps(
  doc: unknown,
  base: (family: string, table: string) => { sets: Map<string, { set: NftSet }> } | undefined,
  existingSet: (family: string, table: string, set: string) => NftSet | undefined,
): NftOp[] {
  const ts = tables(structuredClone(doc), 'set');
  if (ts.length === 0) return [];
  // Complete the sets that exist already, and note the chains whose rule list is replaced.
  const replaceRules = new Set<string>();
  const full = {
    tables: ts.map(({ t, at, family, name }) => {
      list(t.sets, `${at}.sets`).forEach((sv, i) => {
        const s = obj(sv, `${at}.sets[${i}]`);
        const cur = typeof s.name === 'string' ? existingSet(family, name, s.name) : undefined;
        if (cur && s.type === undefined) Object.assign(s, setFields(cur), { ...s });
        if (cur?.flags?.interval && s.elements !== undefined) {
          throw new ObjectsError(`${at}.sets[${i}].elements`, INTERVAL_PATCH);
        }
      });
      list(t.chains, `${at}.chains`).forEach((cv, i) => {
        const c = obj(cv, `${at}.chains[${i}]`);
        if (c.rules !== undefined && typeof c.name === 'string') replaceRules.add(`${family} ${name} ${c.name}`);
      });
      return t;
    }),
  };
  let ops: NftOp[];
  try {
    ops = parseObjects(full, { existingSets: (family, table) => [...(base(family, table)?.sets.keys() ?? [])].map((n) => existingSet(family, table, n)).filter((x): x is NftSet => !!x) });
  } catch (e) {
    // Paths of the completed document are the patch's own, under `set`.
    if (e instanceof ObjectsError) throw new ObjectsError(`set.${e.path}`, e.message.slice(e.path.length + 2));
    throw e;
  }
  const out: NftOp[] = [];
  for (const o of ops) {
    if ('set' in o && o.op === 'add') {
      const cur = existingSet(o.set.family, o.set.table, o.set.name);
      if (cur && JSON.stringify(setFields(cur)) !== JSON.stringify(setFields(o.set))) {
        throw new ObjectsError(`set: set ${o.set.name}`, 'a patch cannot change a set\'s definition (delete the set in the same patch to redefine it)');
      }
    }
    out.push(o);
    if ('chain' in o && o.op === 'add' && replaceRules.has(`${o.chain.family} ${o.chain.table} ${o.chain.name}`)) {
      out.push({ op: 'flush', chain: { family: o.chain.family, table: o.chain.table, name: o.chain.name } });
    }
  }
  return out;
}

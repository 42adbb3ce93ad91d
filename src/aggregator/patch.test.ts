// Patches against a declared state: which ops they make, and what they refuse (the wire path and
// minimal kernel batches are in server.test.ts).
import { parseObjects } from './objects';
import { parsePatch } from './patch';
import { applyOps, checkOps, countObjects, type Ruleset } from '../nft/ruleset';

const declared = (): Ruleset => {
  const s: Ruleset = new Map();
  applyOps(s, parseObjects({
    tables: [{
      family: 'ip', name: 'fw',
      sets: [{ name: 'deny', type: 'ipv4_addr', elements: ['10.0.0.1', '10.0.0.2'] }, { name: 'nets', type: 'ipv4_addr', flags: ['interval'], elements: ['10.0.0.0/8'] }],
      chains: [{ name: 'in', hook: 'input', rules: [{ match: { saddr: '@deny' }, verdict: 'drop' }] }, { name: 'log', rules: [{ log: true }] }],
    }],
  }));
  return s;
};

const kinds = (ops: ReturnType<typeof parsePatch>) => ops.map((o) => `${o.op} ${Object.keys(o)[1]}`);

test('deletes come first, then sets; the result is a valid change of the declared state', () => {
  const s = declared();
  const ops = parsePatch({
    delete: { tables: [{ family: 'ip', name: 'fw', chains: [{ name: 'log' }], sets: [{ name: 'deny', elements: ['10.0.0.1'] }] }] },
    set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'deny', elements: ['10.0.0.3'] }], chains: [{ name: 'in', rules: [{ counter: true }] }, { name: 'extra' }] }] },
  }, s);
  expect(kinds(ops)).toEqual(['delete chain', 'delete elements', 'add table', 'add chain', 'flush chain', 'add chain', 'add set', 'add elements', 'add rule']);
  expect(checkOps(s, ops)).toBeUndefined();
  applyOps(s, ops);
  expect(countObjects(s)).toMatchObject({ chains: 2, sets: 2, rules: 1, elements: 2 + 2 });
  expect([...s.get('ip fw')!.sets.get('deny')!.elements.keys()].sort()).toEqual(['0a000002/', '0a000003/']);
});

test('a chain given without rules keeps its rules; a table alone deletes the table', () => {
  const s = declared();
  expect(kinds(parsePatch({ set: { tables: [{ family: 'ip', name: 'fw', chains: [{ name: 'in' }] }] } }, s))).toEqual(['add table', 'add chain']);
  expect(kinds(parsePatch({ delete: { tables: [{ family: 'ip', name: 'fw' }] } }, s))).toEqual(['delete table']);
});

test.each([
  [{ delete: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'nets', elements: ['10.0.0.0/8'] }] }] } }, /delete\.tables\[0\]\.sets\[0\]\.elements: the ranges of an existing interval set/],
  [{ set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'nets', elements: ['11.0.0.0/8'] }] }] } }, /set\.tables\[0\]\.sets\[0\]\.elements: the ranges of an existing interval set/],
  [{ delete: { tables: [{ family: 'ip', name: 'fw', chains: [{ name: 'nope' }] }] } }, /delete\.tables\[0\]\.chains\[0\]\.name: no chain nope/],
  [{ set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'deny', elements: ['300.0.0.1'] }] }] } }, /set\.tables\[0\]\.sets\[0\]\.elements\[0\]: bad IPv4 address/],
  [{ set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'new' }] }] } }, /set\.tables\[0\]\.sets\[0\]\.type: expected/],
  [{ set: { bogus: 1 } }, /set\.bogus: unknown field/],
])('refuses %j', (patch, re) => {
  expect(() => parsePatch(patch, declared())).toThrow(re);
});

test('an interval set is redefined by deleting and setting it in one patch', () => {
  const s = declared();
  const ops = parsePatch({
    delete: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'nets' }] }] },
    set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'nets', type: 'ipv4_addr', flags: ['interval'], elements: ['11.0.0.0/8', '10.0.0.0/8'] }] }] },
  }, s);
  expect(checkOps(s, ops)).toBeUndefined();
  applyOps(s, ops);
  expect(s.get('ip fw')!.sets.get('nets')!.elements.size).toBe(2); // merged: 10.0.0.0 .. 12.0.0.0 (end)
});

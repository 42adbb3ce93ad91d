// The ruleset model's kernel meaning where the aggregator's tests do not reach it (flowtables, the
// caller's own refusals) and its sorted dump.
import type { NftOp } from '../native/nft-types';
import { applyOps, checkOps, dumpRuleset, type Ruleset } from './ruleset';

const T = { family: 'ip' as const, table: 't' };
const table: NftOp = { op: 'add', table: { family: 'ip', name: 't' } };
const set: NftOp = { op: 'add', set: { ...T, name: 's', keyType: 'ipv4_addr' } };
const elems = (...last: number[]): NftOp => ({ op: 'add', elements: { ...T, set: 's', elements: last.map((b) => ({ key: new Uint8Array([10, 0, 0, b]) })) } });
const chain = (name: string): NftOp => ({ op: 'add', chain: { ...T, name } });
const flowtable = (...devices: string[]): NftOp => ({ op: 'add', flowtable: { ...T, name: 'f', devices } });

const made = (ops: NftOp[]): Ruleset => {
  const s: Ruleset = new Map();
  expect(checkOps(s, ops)).toBeUndefined();
  applyOps(s, ops);
  return s;
};

test('the dump is the same for the same content, whatever order it was made in', () => {
  const a = made([table, set, elems(1, 2), chain('b'), chain('a')]);
  const b = made([table, chain('a'), chain('b'), set, elems(2), elems(1)]);
  expect(dumpRuleset(a)).toEqual(dumpRuleset(b));
  expect(dumpRuleset(a).split('\n')).toEqual([
    'table ip t',
    '  chain a {}',
    '  chain b {}',
    '  set s {"keyType":"ipv4_addr"}',
    '    element 0a000001/',
    '    element 0a000002/',
  ]);
});

test('an existing flowtable added again gains the devices it lacked; a missing one cannot be deleted', () => {
  const s = made([table, flowtable('eth0'), flowtable('eth1', 'eth0')]);
  expect(s.get('ip t')!.flowtables.get('f')!.devices).toEqual(['eth0', 'eth1']);
  const del: NftOp = { op: 'delete', flowtable: { ...T, name: 'g', devices: [] } };
  expect(checkOps(s, [del])).toEqual({ index: 0, reason: 'flowtable g does not exist in table ip t' });
});

test("the caller's own refusal names the op, after the table's existence", () => {
  const noSets = (o: NftOp) => ('set' in o ? 'no sets here' : undefined);
  expect(checkOps(new Map(), [table, chain('a'), set], noSets)).toEqual({ index: 2, reason: 'no sets here' });
  expect(checkOps(new Map(), [set], noSets)).toEqual({ index: 0, reason: 'table ip t is not declared' });
});

// The addon checks its arguments' types and says what it expected (no crash, no silent default).
import { loadNative, nativeAvailable } from '../src/native';

const t = nativeAvailable() ? test : test.skip;

t('malformed arguments are errors naming what was expected', () => {
  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.nftApply('not a buffer')).toThrow(/nftApply\(batch: Buffer/);
  expect(() => addon.nftApply(Buffer.alloc(0), 42)).toThrow(/netns: a path string/);
  expect(() => addon.conntrackDelete({ family: 2, proto: 17 }, {})).toThrow(/netns: a path string/);
  expect(() => addon.conntrackDelete({ family: 'ip', proto: 17 })).toThrow(/family and proto are numbers/);
  expect(() => addon.conntrackDelete({ family: 2, proto: 17, origDst: new Uint8Array(16) })).toThrow(/origDst: address bytes of the family/);
  expect(() => addon.conntrackDelete([{ family: 2, proto: 17 }, { family: 10, proto: 17 }])).toThrow(/share one family/);
  expect(() => addon.conntrackDelete({ family: 2, proto: 17, keepReplySrc: 'x' })).toThrow(/keepReplySrc: an array/);
  expect(() => addon.nftList('ip', 'kpng')).toThrow(/nftList/);
});

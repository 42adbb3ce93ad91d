// The addon checks its arguments' types and says what it expected (no crash, no silent default).
import { loadNative } from '../src/native';
import { deleteLink } from '../src/native/rtnl';
import { gated, need } from './helpers/gate';
import { loadTestNative } from './helpers/test-native';

const t = gated(need.native()).test;

t('malformed arguments are errors naming what was expected', () => {
  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.nftApply('not a buffer')).toThrow(/nftApply\(batch: Buffer/);
  expect(() => addon.nftApply(Buffer.alloc(0), 42)).toThrow(/netns: a path string/);
  expect(() => addon.conntrackDelete({ family: 2, proto: 17 }, {})).toThrow(/netns: a path string/);
  expect(() => addon.conntrackDelete({ family: 'ip', proto: 17 })).toThrow(/family and proto are numbers/);
  expect(() => addon.conntrackDelete({ family: 2, proto: 17, origDst: new Uint8Array(16) })).toThrow(/origDst: address bytes of the family/);
  expect(() => addon.conntrackDelete([{ family: 2, proto: 17 }, { family: 10, proto: 17 }])).toThrow(/share one family/);
  expect(() => addon.conntrackDelete({ family: 2, proto: 17, keepReplySrc: 'x' })).toThrow(/keepReplySrc: an array/);
  expect(() => addon.nftListChains('ip', 'kpng')).toThrow(/nftListChains\(family: number/);
  expect(() => addon.nftListChains(2, 'kpng', 5)).toThrow(/netns: a path string/);
});

t('the eBPF calls check their arguments too', async () => {
  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.ebpfOpen('x')).toThrow(/ebpfOpen\(\{cgroup, pinDir, object\?, mapEntries\?, prealloc\?, hostNetnsOnly\?, netns\?, socketDestroy\?\}\)/);
  expect(() => addon.ebpfOpen({ cgroup: 'relative', pinDir: '/sys/fs/bpf/x' })).toThrow(/cgroup: an absolute path string/);
  expect(() => addon.ebpfOpen({ cgroup: '/sys/fs/cgroup', pinDir: '/sys/fs/bpf/x', mapEntries: -1 })).toThrow(/mapEntries: a number of entries/);
  expect(() => addon.ebpfOpen({ cgroup: '/sys/fs/cgroup', pinDir: '/sys/fs/bpf/x', hostNetnsOnly: true, netns: 'relative' })).toThrow(/netns: an absolute path string/);
  expect(() => addon.ebpfMapApply('1', [])).toThrow(/handle: the number returned by ebpfOpen/);
  expect(() => addon.ebpfMapApply(987654, [])).toThrow(/ebpf handle 987654 is closed/);
  expect(() => addon.ebpfMapDump(987654, 'kpng_svc')).toThrow(/is closed/);
  expect(() => addon.ebpfDestroySockets(987654, Buffer.alloc(0), 0)).toThrow(/is closed/);
  expect(() => addon.ebpfCleanup({ pinDir: 3 })).toThrow(/pinDir: an absolute path string/);
  // Nothing pinned there: nothing removed, no error.
  await expect(addon.ebpfCleanup({ pinDir: '/sys/fs/bpf/kpng-test-kbf-absent' })).resolves.toEqual([]);
});

t('rtnlLinkDelete checks its arguments', async () => {
  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.rtnlLinkDelete(3)).toThrow(/rtnlLinkDelete\(name, \{kind\?\}, netns\?\)/);
  expect(() => addon.rtnlLinkDelete('kube-ipvs0', { kind: 1 })).toThrow(/kind is a link kind string/);
  expect(() => addon.rtnlLinkDelete('kube-ipvs0', {}, 7)).toThrow(/netns: a path string/);
  await expect(deleteLink('no spaces allowed')).rejects.toThrow(RangeError);
});

t('ipsetDestroy checks its arguments', () => {
  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.ipsetDestroy('KUBE-CLUSTER-IP')).toThrow(/ipsetDestroy\(names: string\[\]/);
  expect(() => addon.ipsetDestroy([''])).toThrow(/1\.\.31 characters/);
  expect(() => addon.ipsetDestroy(['x'.repeat(32)])).toThrow(/1\.\.31 characters/);
  expect(() => addon.ipsetDestroy(['KUBE-CLUSTER-IP'], 5)).toThrow(/netns: a path string/);
});

gated(need.testNative()).test('the test addon checks its arguments too', () => {
  const addon = loadTestNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.nftList('ip', 'kpng')).toThrow(/nftList\(family: number/);
  expect(() => addon.nftList(2, 'kpng', true, 5)).toThrow(/netns: a path string/);
});

// `--to ebpf` set-up without a kernel: the default cgroup from mountinfo and flag validation.
import { cgroup2Mount } from './index';
import { ebpfBackend } from './definition';
import { createLogger } from '../../util/log';

test('the default attach point is the cgroup v2 mount in mountinfo', () => {
  const hybrid = [
    '25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw',
    '29 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755',
    '30 29 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate',
    '31 29 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd',
  ].join('\n');
  expect(cgroup2Mount(hybrid)).toBe('/sys/fs/cgroup/unified');
  expect(cgroup2Mount('35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw')).toBe('/sys/fs/cgroup');
  expect(cgroup2Mount(hybrid.split('\n').filter((l) => !l.includes('cgroup2')).join('\n'))).toBeUndefined();
});

test('a bad --ebpf-map-entries is a clear error before anything is loaded', () => {
  const log = createLogger('error', () => {});
  expect(() => ebpfBackend.create({ node: 'n1', log, flags: { cgroup: '/sys/fs/cgroup/unified/x', bpffs: '/sys/fs/bpf/x', 'ebpf-map-entries': 'lots' } }))
    .toThrow(/--ebpf-map-entries: "lots" is not a number of entries/);
});

// Sysctl writes that fail as they do in containers and namespaces (src/config/faulty.ts):
// each failure is a warning naming the entry and the errno, every other setting is still applied,
// and nothing throws (kpng keeps serving: the settings are tuning, not its rules).
import { applyConntrack } from '../src/config/conntrack';
import { applyRouteLocalnet, ROUTE_LOCALNET } from '../src/config/route-localnet';
import { createLogger } from '../src/util/log';
import { FaultySysctl } from '../src/config/faulty';

const MAX = '/proc/sys/net/netfilter/nf_conntrack_max';
const HASH = '/sys/module/nf_conntrack/parameters/hashsize';
const EST = '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established';
const LIBERAL = '/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal';

const logger = () => {
  const lines: string[] = [];
  return { lines, log: createLogger('info', (l) => lines.push(l)) };
};

test('conntrack: a host-wide entry refused (EPERM, EROFS) is a warning; the per-namespace ones are still written', () => {
  for (const code of ['EPERM', 'EROFS', 'EACCES', 'EINVAL'] as const) {
    const io = new FaultySysctl(new Map([[MAX, 65536], [HASH, 16384], [EST, 432000]]), new Map([[MAX, code], [HASH, code]]));
    const { lines, log } = logger();
    const done = applyConntrack({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86400, tcpBeLiberal: true }, log, io, 2);
    expect(done).toEqual([`${EST}=86400`, `${LIBERAL}=1`]);
    expect(io.writes).toEqual(done);
    expect(lines.filter((l) => /cannot set/.test(l))).toEqual([
      expect.stringContaining(`conntrack: cannot set ${MAX} = 131072: ${code}`),
      expect.stringContaining(`conntrack: cannot set ${HASH} = 32768: ${code}`),
    ]);
  }
});

test('conntrack: every entry read-only (an unprivileged pod): warnings only, nothing thrown', () => {
  const all = new Map([[MAX, 'EROFS'], [HASH, 'EROFS'], [EST, 'EROFS'], [LIBERAL, 'EROFS']] as const);
  const io = new FaultySysctl(new Map([[MAX, 65536], [HASH, 16384]]), new Map(all), new Set([EST]));
  const { lines, log } = logger();
  expect(applyConntrack({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86400, tcpBeLiberal: true }, log, io, 2)).toEqual([]);
  expect(lines.filter((l) => /cannot set .*EROFS/.test(l))).toHaveLength(4);
});

test('route_localnet refused: a warning that says what stops working and what to do; false', () => {
  for (const code of ['EROFS', 'EACCES'] as const) {
    const io = new FaultySysctl(new Map([[ROUTE_LOCALNET, 0]]), new Map([[ROUTE_LOCALNET, code]]));
    const { lines, log } = logger();
    expect(applyRouteLocalnet(log, io)).toBe(false);
    expect(lines.join('\n')).toMatch(new RegExp(`cannot set ${ROUTE_LOCALNET} = 1 \\(${code}\\): node ports on 127.0.0.1 will not answer; run kpng --init-only`));
  }
  const ok = new FaultySysctl(new Map([[ROUTE_LOCALNET, 1]]), new Map([[ROUTE_LOCALNET, 'EROFS']]));
  // Already set (by an init container): nothing to write, so a read-only /proc/sys is fine.
  expect(applyRouteLocalnet(logger().log, ok)).toBe(true);
});

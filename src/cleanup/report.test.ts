// The clean-up report's summary line and its option checks (no kernel: bad options are refused first).
import { cleanupNode, cleanupExitCode, removeUpstreamRules, emptyReport, summarizeReport } from './index';
import { mergeReport } from './report';
import { silentLogger } from '../util/log';

test('the summary line names what went, what was kept, notes and the error count', () => {
  expect(summarizeReport(emptyReport())).toBe('clean-up: nothing to remove');
  const r = {
    ...emptyReport(), tables: ['ip kube-proxy', 'ip6 kube-proxy'], chains: Array.from({ length: 9 }, (_, i) => `ip nat KUBE-SVC-${i}`),
    legacyChains: ['ip nat KUBE-SERVICES', 'ip6 filter KUBE-FORWARD'], jumpRules: 3, ipvsKept: ['tcp 192.168.99.5:80'], notes: ['IPVS not available'],
    errors: [{ part: 'bpf' as const, what: '/sys/fs/bpf/kpng', code: 'EPERM', message: 'unlink: EPERM' }],
  };
  expect(summarizeReport(r)).toBe('clean-up: removed 2 nftables tables (ip kube-proxy, ip6 kube-proxy), 9 iptables-nft chains, '
    + '2 iptables-legacy chains (ip nat KUBE-SERVICES, ip6 filter KUBE-FORWARD), 3 jump rules; '
    + 'kept 1 IPVS services in excluded CIDRs; IPVS not available; 1 errors');
  expect(cleanupExitCode(r)).toBe(1);
  expect(cleanupExitCode({ ...r, errors: [] })).toBe(0);
  // The legacy chains are merged into their own field, summed into the jump rules.
  const m = mergeReport(emptyReport(), { legacyChains: ['ip filter KUBE-FORWARD'], jumpRules: 1 });
  expect(summarizeReport(mergeReport(m, { chains: ['ip filter KUBE-FORWARD'], jumpRules: 1 })))
    .toBe('clean-up: removed 1 iptables-nft chains (ip filter KUBE-FORWARD), 1 iptables-legacy chains (ip filter KUBE-FORWARD), 2 jump rules');
});

test('a malformed excluded CIDR is refused before anything is removed', async () => {
  // Were the check to go, these still could not touch this machine: no such namespace or pin directory.
  const away = { netns: '/var/run/netns/kcln-absent', pinDir: '/sys/fs/bpf/kcln-absent' };
  await expect(cleanupNode({ log: silentLogger, ...away, ipvsExcludeCIDRs: ['10.0.0.0/8', 'ten/8'] })).rejects.toThrow(RangeError);
  await expect(cleanupNode({ log: silentLogger, ...away, which: 'both' as 'all' })).rejects.toThrow(/which: kpng, upstream or all/);
  await expect(removeUpstreamRules(silentLogger, { netns: away.netns, ipvsExcludeCIDRs: ['10.0.0.0/33'] })).rejects.toThrow(/not a CIDR/);
});

// The iptables-nft and ipset parts of the clean-up on chains and sets made by the real iptables-nft and
// ipset tools in a kcln- netns, shaped like upstream kube-proxy's (iptables mode: KUBE-SERVICES ->
// KUBE-SVC- -> KUBE-SEP-, jumps from the base chains with comments, a goto; IPVS mode: KUBE-NODE-PORT,
// ip6 KUBE-FORWARD, rules matching KUBE-CLUSTER-IP / KUBE-LOOP-BACK) beside the kubelet's KUBE-FIREWALL /
// KUBE-KUBELET-CANARY and a rule and a set of someone else: only kube-proxy's go.
import { isKubeProxyChain, removeUpstreamRules } from '../../src/cleanup';
import { createLogger } from '../../src/util/log';
import { Netns } from '../helpers/netns';
import { gated, need } from '../helpers/gate';

const d = gated(need.netns(), need.native(), need.ipset()).describe;

test('kube-proxy\'s chains are told from the kubelet\'s and from others', () => {
  for (const c of ['KUBE-SERVICES', 'KUBE-SVC-ABCDEF', 'KUBE-SEP-X', 'KUBE-EXT-Y', 'KUBE-FW-Z', 'KUBE-SVL-A', 'KUBE-MARK-MASQ', 'KUBE-PROXY-CANARY', 'KUBE-NODE-PORT', 'KUBE-IPVS-FILTER']) {
    expect(isKubeProxyChain(c)).toBe(true);
  }
  for (const c of ['KUBE-FIREWALL', 'KUBE-KUBELET-CANARY', 'KUBE-IPTABLES-HINT', 'KUBE-MARK-DROP', 'PREROUTING', 'CNI-xyz', 'KUBE-SERVICE']) {
    expect(isKubeProxyChain(c)).toBe(false);
  }
});

d('iptables-nft chains and ipsets', () => {
  let ns: Netns;
  beforeEach(() => { ns = new Netns('kcln'); });
  afterEach(() => ns?.destroy());

  const ipt = (...args: string[]) => ns.exec('iptables', ['-w', ...args]);
  const ip6t = (...args: string[]) => ns.exec('ip6tables', ['-w', ...args]);
  const ipset = (...args: string[]) => ns.exec('ipset', args);
  const setNames = () => ipset('list', '-n').split('\n').filter(Boolean).sort();

  test('jumps deleted, kube-proxy chains flushed and deleted in ip and ip6, the rest kept', async () => {
    for (const c of ['KUBE-SERVICES', 'KUBE-SVC-ABC', 'KUBE-SEP-X', 'KUBE-MARK-MASQ', 'KUBE-POSTROUTING', 'KUBE-KUBELET-CANARY', 'KCLN-KEEP']) ipt('-t', 'nat', '-N', c);
    ipt('-t', 'nat', '-A', 'PREROUTING', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES');
    ipt('-t', 'nat', '-A', 'OUTPUT', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES');
    ipt('-t', 'nat', '-A', 'POSTROUTING', '-m', 'comment', '--comment', 'kubernetes postrouting rules', '-j', 'KUBE-POSTROUTING');
    ipt('-t', 'nat', '-A', 'KUBE-SERVICES', '-d', '10.96.0.1/32', '-p', 'tcp', '--dport', '443', '-j', 'KUBE-SVC-ABC');
    ipt('-t', 'nat', '-A', 'KUBE-SVC-ABC', '-j', 'KUBE-SEP-X');
    ipt('-t', 'nat', '-A', 'KUBE-SEP-X', '-j', 'KUBE-MARK-MASQ');
    ipt('-t', 'nat', '-A', 'KUBE-SEP-X', '-p', 'tcp', '-j', 'DNAT', '--to-destination', '10.0.0.1:443');
    ipt('-t', 'nat', '-A', 'KUBE-MARK-MASQ', '-j', 'MARK', '--or-mark', '0x4000');
    // Someone else's chain that goes to one of kube-proxy's: that rule goes, the chain stays.
    ipt('-t', 'nat', '-A', 'KCLN-KEEP', '-s', '192.0.2.8/32', '-g', 'KUBE-MARK-MASQ');
    ipt('-t', 'nat', '-A', 'KCLN-KEEP', '-s', '192.0.2.9/32', '-j', 'ACCEPT');
    ipt('-t', 'nat', '-A', 'PREROUTING', '-j', 'KCLN-KEEP');
    // The kubelet's, kept.
    ipt('-t', 'filter', '-N', 'KUBE-FIREWALL');
    ipt('-t', 'filter', '-A', 'INPUT', '-j', 'KUBE-FIREWALL');
    ipt('-t', 'filter', '-A', 'KUBE-FIREWALL', '-s', '192.0.2.7/32', '-j', 'DROP');
    ipt('-t', 'filter', '-N', 'KUBE-PROXY-FIREWALL');
    ipt('-t', 'filter', '-A', 'INPUT', '-m', 'conntrack', '--ctstate', 'NEW', '-j', 'KUBE-PROXY-FIREWALL');
    ipt('-t', 'mangle', '-N', 'KUBE-PROXY-CANARY');
    // IPVS mode, IPv6.
    ip6t('-t', 'filter', '-N', 'KUBE-FORWARD');
    ip6t('-t', 'filter', '-A', 'FORWARD', '-m', 'comment', '--comment', 'kubernetes forwarding rules', '-j', 'KUBE-FORWARD');
    ip6t('-t', 'filter', '-A', 'KUBE-FORWARD', '-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'ACCEPT');
    ip6t('-t', 'nat', '-N', 'KUBE-NODE-PORT');
    // IPVS mode's sets, used by rules of its chains; and someone else's set, used by someone else's rule.
    ipset('create', 'KUBE-CLUSTER-IP', 'hash:ip,port');
    ipset('create', 'KUBE-LOOP-BACK', 'hash:ip,port,ip');
    ipset('create', 'KCLN-KEEP-SET', 'hash:ip');
    ipt('-t', 'nat', '-A', 'KUBE-SERVICES', '-m', 'set', '--match-set', 'KUBE-CLUSTER-IP', 'dst,dst', '-j', 'KUBE-MARK-MASQ');
    ipt('-t', 'nat', '-A', 'KUBE-POSTROUTING', '-m', 'set', '--match-set', 'KUBE-LOOP-BACK', 'dst,dst,src', '-j', 'MASQUERADE');
    ipt('-t', 'nat', '-A', 'KCLN-KEEP', '-m', 'set', '--match-set', 'KCLN-KEEP-SET', 'src', '-j', 'RETURN');

    const report = await removeUpstreamRules(createLogger('error', () => {}), { netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(new Set(report.chains)).toEqual(new Set([
      'ip nat KUBE-SERVICES', 'ip nat KUBE-SVC-ABC', 'ip nat KUBE-SEP-X', 'ip nat KUBE-MARK-MASQ', 'ip nat KUBE-POSTROUTING',
      'ip filter KUBE-PROXY-FIREWALL', 'ip mangle KUBE-PROXY-CANARY', 'ip6 filter KUBE-FORWARD', 'ip6 nat KUBE-NODE-PORT',
    ]));
    // PREROUTING, OUTPUT, POSTROUTING, KCLN-KEEP's goto, INPUT -> KUBE-PROXY-FIREWALL, ip6 FORWARD.
    expect(report.jumpRules).toBe(6);
    expect(new Set(report.ipsets)).toEqual(new Set(['KUBE-CLUSTER-IP', 'KUBE-LOOP-BACK']));
    expect(setNames()).toEqual(['KCLN-KEEP-SET']);

    const left = ns.ruleset();
    expect(left).not.toMatch(/KUBE-(SERVICES|SVC-|SEP-|MARK-MASQ|POSTROUTING|PROXY-|FORWARD|NODE-PORT)/);
    expect(left).toContain('chain KUBE-KUBELET-CANARY');
    expect(left).toContain('jump KUBE-FIREWALL');
    expect(left).toContain('ip saddr 192.0.2.7 counter packets 0 bytes 0 drop');
    expect(left).toContain('jump KCLN-KEEP');
    expect(left).toContain('ip saddr 192.0.2.9 counter packets 0 bytes 0 accept');
    expect(left).not.toContain('192.0.2.8');
    // The tables stay, and iptables still reads them.
    expect(ipt('-t', 'nat', '-S')).toContain('-A PREROUTING -j KCLN-KEEP');

    const again = await removeUpstreamRules(createLogger('error', () => {}), { netns: ns.path });
    expect(again.errors).toEqual([]);
    expect(again.chains).toEqual([]);
    expect(again.jumpRules).toBe(0);
    expect(again.ipsets).toEqual([]);
  }, 60_000);

  test('a kube-proxy ipset that someone else\'s rule still uses stays, and is reported', async () => {
    ipset('create', 'KUBE-HEALTH-CHECK-NODE-PORT', 'bitmap:port', 'range', '0-65535');
    ipset('create', 'KUBE-NODE-PORT-TCP', 'bitmap:port', 'range', '0-65535');
    ipt('-t', 'filter', '-A', 'INPUT', '-m', 'set', '--match-set', 'KUBE-HEALTH-CHECK-NODE-PORT', 'dst', '-j', 'ACCEPT');
    const report = await removeUpstreamRules(createLogger('error', () => {}), { netns: ns.path });
    expect(report.ipsets).toEqual(['KUBE-NODE-PORT-TCP']);
    expect(report.errors).toEqual([{ part: 'ipset', what: 'KUBE-HEALTH-CHECK-NODE-PORT', code: 'IPSET_ERR_BUSY', message: 'still referenced (by a rule or a list set)' }]);
    expect(setNames()).toEqual(['KUBE-HEALTH-CHECK-NODE-PORT']);
  }, 60_000);
});

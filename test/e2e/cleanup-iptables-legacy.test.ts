// The iptables-legacy part of the clean-up (native/iptables_legacy.cc, x_tables through sockopts) on
// rulesets made by the real iptables-legacy-restore / ip6tables-legacy-restore in a kleg- netns,
// shaped like upstream kube-proxy's iptables mode (PREROUTING/OUTPUT -> KUBE-SERVICES -> KUBE-SVC- ->
// KUBE-SEP- with DNAT and KUBE-MARK-MASQ, POSTROUTING -> KUBE-POSTROUTING, the filter chains) beside
// the kubelet's KUBE-FIREWALL and canaries, and someone else's chains and rules with counters: only
// kube-proxy's chains and the jumps to them go; the rest reads back identical, counters included.
import { listLegacyKubeProxyChains, removeUpstreamRules } from '../../src/cleanup';
import { createLogger } from '../../src/util/log';
import { Netns } from '../helpers/netns';
import { gated, need } from '../helpers/gate';

const d = gated(need.netns(), need.native(), need.iptablesLegacy()).describe;

// kube-proxy's chains, spelled out here rather than through the product's isKubeProxyChain.
const KUBE = /^KUBE-(SERVICES|EXTERNAL-SERVICES|NODEPORTS|POSTROUTING|MARK-MASQ|FORWARD|PROXY-FIREWALL|PROXY-CANARY|SVC-|SEP-)/;

/** iptables-save output without its date comments: `*table`, `:CHAIN POLICY [p:b]`, `[p:b] -A ...`, COMMIT. */
const lines = (save: string): string[] => save.split('\n').filter((l) => l && !l.startsWith('#'));

/** What must be gone from a save: kube-proxy's chain declarations, their rules, and jumps / gotos to them. */
function isKubeLine(l: string): boolean {
  const decl = /^:(\S+) /.exec(l);
  if (decl) return KUBE.test(decl[1]);
  const chain = /^(?:\[\d+:\d+\] )?-A (\S+)/.exec(l)?.[1];
  const target = / -[jg] (\S+)$/.exec(l)?.[1];
  return chain !== undefined && (KUBE.test(chain) || (target !== undefined && KUBE.test(target)));
}

const V4 = `*nat
:PREROUTING ACCEPT [11:660]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [3:180]
:POSTROUTING ACCEPT [4:240]
:KLEG-KEEP - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SEP-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-NPX46M4PTMTKRN6Y - [0:0]
[5:300] -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
[2:120] -A PREROUTING -s 198.51.100.0/24 -j KLEG-KEEP
[1:60] -A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
[1:60] -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
[3:180] -A KLEG-KEEP -s 198.51.100.8/32 -g KUBE-MARK-MASQ
[4:240] -A KLEG-KEEP -s 198.51.100.9/32 -j ACCEPT
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j KUBE-SVC-NPX46M4PTMTKRN6Y
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SEP-AAAAAAAAAAAAAAAA -s 10.244.1.10/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-AAAAAAAAAAAAAAAA -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.10:8080
-A KUBE-SEP-BBBBBBBBBBBBBBBB -s 10.244.2.10/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.2.10:8080
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-NPX46M4PTMTKRN6Y
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/web:http -> 10.244.1.10:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-AAAAAAAAAAAAAAAA
-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/web:http -> 10.244.2.10:8080" -j KUBE-SEP-BBBBBBBBBBBBBBBB
COMMIT
*filter
:INPUT ACCEPT [20:1200]
:FORWARD DROP [2:120]
:OUTPUT ACCEPT [9:540]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
:OTHER-AFTER - [0:0]
[7:420] -A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
[9:540] -A INPUT -j KUBE-FIREWALL
[6:360] -A INPUT -s 203.0.113.0/24 -j OTHER-AFTER
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
[8:480] -A FORWARD -s 203.0.113.0/24 -j ACCEPT
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
[9:540] -A OUTPUT -j KUBE-FIREWALL
[1:60] -A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-SERVICES -d 10.96.0.99/32 -p tcp -m comment --comment "default/noep:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
[2:120] -A OTHER-AFTER -s 203.0.113.3/32 -j DROP
[4:240] -A OTHER-AFTER -j ACCEPT
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
`;

const V6 = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SEP-CCCCCCCCCCCCCCCC - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-DDDDDDDDDDDDDDDD - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
-A KUBE-SEP-CCCCCCCCCCCCCCCC -s fd00:10::10/128 -j KUBE-MARK-MASQ
-A KUBE-SEP-CCCCCCCCCCCCCCCC -p tcp -m tcp -j DNAT --to-destination [fd00:10::10]:8080
-A KUBE-SERVICES -d fd00:96::10/128 -p tcp -m tcp --dport 80 -j KUBE-SVC-DDDDDDDDDDDDDDDD
-A KUBE-SVC-DDDDDDDDDDDDDDDD -j KUBE-SEP-CCCCCCCCCCCCCCCC
COMMIT
*filter
:INPUT ACCEPT [3:240]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KLEG6-KEEP - [0:0]
:KUBE-FORWARD - [0:0]
-A INPUT -j KUBE-FORWARD
[6:480] -A INPUT -s 2001:db8::/32 -j KLEG6-KEEP
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
[5:400] -A KLEG6-KEEP -p tcp -m tcp --dport 22 -j ACCEPT
-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
`;

const quiet = createLogger('error', () => {});

d('iptables-legacy chains', () => {
  let ns: Netns;
  beforeEach(() => { ns = new Netns('kleg'); });
  afterEach(() => ns?.destroy());

  const save = (): string[] => [...lines(ns.exec('iptables-legacy-save', ['-c'])), ...lines(ns.exec('ip6tables-legacy-save', ['-c']))];
  const tableNames = (): string => ns.exec('cat', ['/proc/net/ip_tables_names', '/proc/net/ip6_tables_names']);
  /** One UDP datagram from and to 203.0.113.1, on lo: a packet through filter INPUT. */
  const sendPacket = (): void => {
    ns.exec('ip', ['addr', 'add', '203.0.113.1/32', 'dev', 'lo']);
    ns.exec(process.execPath, ['-e', `const s = require('dgram').createSocket('udp4');
      s.send('x', 9, '203.0.113.1', (e) => { s.close(); process.exit(e ? 1 : 0); });`]);
  };

  test('kube-proxy\'s chains and the jumps to them go, in ip and ip6; everything else stays as it was', async () => {
    ns.exec('iptables-legacy-restore', ['-c'], V4);
    ns.exec('ip6tables-legacy-restore', ['-c'], V6);
    const before = save();
    expect(before).toContain('[5:300] -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES');

    expect(await listLegacyKubeProxyChains({ netns: ns.path })).toEqual(expect.arrayContaining([
      { family: 'ip', table: 'nat', chain: 'KUBE-SERVICES', rules: 2 },
      { family: 'ip', table: 'nat', chain: 'KUBE-SVC-NPX46M4PTMTKRN6Y', rules: 3 },
      { family: 'ip', table: 'mangle', chain: 'KUBE-PROXY-CANARY', rules: 0 },
      { family: 'ip6', table: 'filter', chain: 'KUBE-FORWARD', rules: 1 },
    ]));

    const report = await removeUpstreamRules(quiet, { netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(report.chains).toEqual([]); // no iptables-nft here
    expect(new Set(report.legacyChains)).toEqual(new Set([
      ...['KUBE-MARK-MASQ', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-SEP-AAAAAAAAAAAAAAAA', 'KUBE-SEP-BBBBBBBBBBBBBBBB', 'KUBE-SERVICES', 'KUBE-SVC-NPX46M4PTMTKRN6Y'].map((c) => `ip nat ${c}`),
      ...['KUBE-EXTERNAL-SERVICES', 'KUBE-FORWARD', 'KUBE-NODEPORTS', 'KUBE-PROXY-FIREWALL', 'KUBE-SERVICES'].map((c) => `ip filter ${c}`),
      'ip mangle KUBE-PROXY-CANARY',
      ...['KUBE-MARK-MASQ', 'KUBE-POSTROUTING', 'KUBE-SEP-CCCCCCCCCCCCCCCC', 'KUBE-SERVICES', 'KUBE-SVC-DDDDDDDDDDDDDDDD'].map((c) => `ip6 nat ${c}`),
      'ip6 filter KUBE-FORWARD',
    ]));
    // nat: PREROUTING, OUTPUT, POSTROUTING, KLEG-KEEP's goto; filter: INPUT 3, FORWARD 3, OUTPUT 2;
    // ip6 nat: 3; ip6 filter: INPUT, FORWARD.
    expect(report.jumpRules).toBe(4 + 8 + 3 + 2);
    expect(report.notes.filter((n) => n.includes('iptables-legacy'))).toEqual([]);

    // Exactly the kube-proxy lines are gone; every other line (counters included) reads back the same.
    const after = save();
    expect(after).toEqual(before.filter((l) => !isKubeLine(l)));
    expect(before.length - after.length).toBe(before.filter(isKubeLine).length);
    for (const kept of [
      ':PREROUTING ACCEPT [11:660]', ':FORWARD DROP [2:120]', '[2:120] -A PREROUTING -s 198.51.100.0/24 -j KLEG-KEEP',
      '[4:240] -A KLEG-KEEP -s 198.51.100.9/32 -j ACCEPT', '[9:540] -A INPUT -j KUBE-FIREWALL', ':KUBE-KUBELET-CANARY - [0:0]',
      ':KUBE-IPTABLES-HINT - [0:0]', '[5:400] -A KLEG6-KEEP -p tcp -m tcp --dport 22 -j ACCEPT',
    ]) expect(after).toContain(kept);
    expect(after.join('\n')).not.toMatch(/KUBE-(SERVICES|SVC-|SEP-|MARK-MASQ|POSTROUTING|NODEPORTS|FORWARD|PROXY-|EXTERNAL)/);

    // A second run finds nothing and writes nothing.
    const again = await removeUpstreamRules(quiet, { netns: ns.path });
    expect(again.errors).toEqual([]);
    expect(again.legacyChains).toEqual([]);
    expect(again.jumpRules).toBe(0);
    expect(save()).toEqual(after);
    expect(await listLegacyKubeProxyChains({ netns: ns.path })).toEqual([]);

    // The replaced filter table works: INPUT's jump to OTHER-AFTER (now at another offset) counts on.
    sendPacket();
    const accept = save().find((l) => l.endsWith('-A OTHER-AFTER -j ACCEPT'));
    expect(accept).toMatch(/^\[(\d+):\d+\]/);
    expect(Number(/^\[(\d+):/.exec(accept!)![1])).toBeGreaterThan(4);
  }, 60_000);

  test('kept jumps into a kept chain placed after a removed one, gotos and fall-through rules land where they did', async () => {
    // libiptc lays user chains out by name: AAA-BEFORE, KUBE-*, ZZZ-AFTER. Every offset after the
    // removed chains moves.
    ns.exec('iptables-legacy-restore', ['-c'], `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:AAA-BEFORE - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-EEEEEEEEEEEEEEEE - [0:0]
:ZZZ-AFTER - [0:0]
[1:10] -A INPUT -j KUBE-SERVICES
[2:20] -A INPUT -s 203.0.113.1/32 -j ZZZ-AFTER
[3:30] -A INPUT -s 203.0.113.2/32 -g AAA-BEFORE
[4:40] -A AAA-BEFORE -s 203.0.113.4/32 -j ZZZ-AFTER
[5:50] -A AAA-BEFORE -s 203.0.113.5/32
-A AAA-BEFORE -j KUBE-SERVICES
[6:60] -A AAA-BEFORE -s 203.0.113.6/32 -g ZZZ-AFTER
-A KUBE-SERVICES -j KUBE-SVC-EEEEEEEEEEEEEEEE
-A KUBE-SERVICES -j ZZZ-AFTER
-A KUBE-SVC-EEEEEEEEEEEEEEEE -j RETURN
[7:70] -A ZZZ-AFTER -s 203.0.113.3/32 -j DROP
[8:80] -A ZZZ-AFTER -j ACCEPT
COMMIT
`);
    const before = save();
    const report = await removeUpstreamRules(quiet, { netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(new Set(report.legacyChains)).toEqual(new Set(['ip filter KUBE-SERVICES', 'ip filter KUBE-SVC-EEEEEEEEEEEEEEEE']));
    expect(report.jumpRules).toBe(2);
    // iptables-save names a jump's chain from its offset and prints a rule without a target only when
    // its verdict is the next entry: wrong offsets would not read back as these lines.
    const after = save();
    expect(after).toEqual(before.filter((l) => !isKubeLine(l)));
    expect(after).toEqual(expect.arrayContaining([
      '[2:20] -A INPUT -s 203.0.113.1/32 -j ZZZ-AFTER', '[3:30] -A INPUT -s 203.0.113.2/32 -g AAA-BEFORE',
      '[4:40] -A AAA-BEFORE -s 203.0.113.4/32 -j ZZZ-AFTER', '[5:50] -A AAA-BEFORE -s 203.0.113.5/32',
      '[6:60] -A AAA-BEFORE -s 203.0.113.6/32 -g ZZZ-AFTER', '[8:80] -A ZZZ-AFTER -j ACCEPT',
    ]));
    // And the kernel follows them: a packet from 203.0.113.1 reaches ZZZ-AFTER's ACCEPT.
    sendPacket();
    const accept = save().find((l) => l.endsWith('-A ZZZ-AFTER -j ACCEPT'));
    expect(Number(/^\[(\d+):/.exec(accept!)![1])).toBeGreaterThan(8);
  }, 60_000);

  test('a namespace without legacy tables: nothing reported, and no table is created', async () => {
    expect(tableNames()).toBe('');
    expect(await listLegacyKubeProxyChains({ netns: ns.path })).toEqual([]);
    const report = await removeUpstreamRules(quiet, { netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(report.legacyChains).toEqual([]);
    expect(report.jumpRules).toBe(0);
    expect(tableNames()).toBe('');
  }, 60_000);

  test('a table with only builtin chains and someone else\'s rules is left untouched', async () => {
    ns.exec('iptables-legacy', ['-w', '-t', 'raw', '-A', 'PREROUTING', '-s', '192.0.2.1/32', '-j', 'NOTRACK']);
    const before = save();
    const report = await removeUpstreamRules(quiet, { netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(report.legacyChains).toEqual([]);
    expect(save()).toEqual(before);
    // Only the table that was there: listing it created no other.
    expect(tableNames()).toBe('raw\n');
  }, 60_000);
});

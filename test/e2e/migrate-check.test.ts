// `kpng migrate-check` on a node (a kmc- netns) holding what kube-proxy leaves in each mode, made by
// the real tools: iptables mode through iptables-nft and iptables-legacy, nftables mode's table, a
// server on kube-proxy's health port. The command reads the kernel and must say what it found and
// what changes, and change nothing.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { migrationReport } from '../../src/cli/migrate-check';
import type { NodeSurvey } from '../../src/cleanup/survey';
import { listeningPorts } from '../../src/cleanup/survey';
import { KPNG } from '../helpers/cli';
import { gated, need } from '../helpers/gate';
import { Netns } from '../helpers/netns';

const survey = (o: Partial<NodeSurvey> = {}): NodeSurvey => ({
  upstreamNftTables: { ok: true, value: [] }, kpngNftTables: { ok: true, value: [] },
  iptablesNft: { ok: true, value: [] }, iptablesLegacy: { ok: true, value: [] }, ipvsServices: { ok: true, value: 0 },
  routeLocalnet: 0, procSysWritable: true, portsInUse: [], ...o,
});
const input = { node: 'n1', source: 'the command line', backend: 'nft', conntrack: true, warnings: [] as string[] };

test('the report: iptables mode is kept for workloads; what operators lose is listed', () => {
  const r = migrationReport({
    ...input, configuration: { mode: '' }, model: { nodePortAddresses: ['all'], localhostNodePorts: true },
    survey: survey({ iptablesNft: { ok: true, value: [{ family: 'ip', table: 'nat', chain: 'KUBE-SERVICES', rules: 3 }, { family: 'ip', table: 'nat', chain: 'KUBE-SVC-X', rules: 2 }] } }),
  });
  expect(r.workloadChanges).toEqual([]);
  expect(r.text).toContain('from the command line: mode iptables');
  expect(r.text).toContain('node ports on every local address, and on 127.0.0.1 (route_localnet=1), as kube-proxy\'s iptables mode');
  expect(r.operatorChanges.join('\n')).toMatch(/the 2 chains and 5 rules there now go away/);
});

test('the report: what a workload would notice is a change, with what to do', () => {
  // Localhost node ports that cannot get route_localnet; rules of another mode than configured.
  const r = migrationReport({
    ...input, configuration: { mode: 'iptables' }, model: { nodePortAddresses: ['all'], localhostNodePorts: true },
    survey: survey({ upstreamNftTables: { ok: true, value: ['ip kube-proxy'] }, procSysWritable: false, portsInUse: [10256] }),
  });
  expect(r.workloadChanges).toEqual([
    expect.stringMatching(/rules are kube-proxy's nftables mode, but the configuration says iptables/),
    expect.stringMatching(/node ports on 127\.0\.0\.1 will not answer: route_localnet is 0 and this container cannot set it/),
  ]);
  expect(r.before).toEqual([expect.stringMatching(/^port 10256 is taken \(kube-proxy still running\?\)/), expect.stringMatching(/\/proc\/sys is read-only here/)]);
  // Readings that failed are said so, not taken for "nothing there".
  const failed = migrationReport({ ...input, configuration: { mode: 'nftables' }, model: { nodePortAddresses: ['primary'], localhostNodePorts: false }, survey: survey({ iptablesLegacy: { ok: false, error: 'EPERM: Operation not permitted' } }) });
  expect(failed.text).toContain('iptables-legacy: cannot read (EPERM: Operation not permitted)');
  expect(failed.text).toContain('node ports on the node\'s primary addresses, as kube-proxy\'s nftables mode');
});

test('listening ports are read from /proc/net/tcp and tcp6 (LISTEN only)', () => {
  // 0x2810 = 10256 listening; 0x2809 = 10249 only connected in tcp, listening in tcp6; 0x2808 = 10248 not there.
  const tcp = '  sl  local_address rem_address   st\n   0: 00000000:2810 00000000:0000 0A 0\n   1: 0100007F:2809 0100007F:9999 01 0\n';
  const tcp6 = '  sl  local_address rem_address st\n   0: 00000000000000000000000000000000:2809 00000000000000000000000000000000:0000 0A 0\n';
  expect(listeningPorts([10248, 10249, 10256], (p) => (p.endsWith('6') ? tcp6 : tcp))).toEqual([10249, 10256]);
  expect(listeningPorts([10249, 10256], (p) => (p.endsWith('6') ? tcp6.replace(' 0A ', ' 01 ') : tcp))).toEqual([10256]);
});

const d = gated(need.netns(), need.native(), need.iptablesLegacy()).describe;

d('kpng migrate-check on a node', () => {
  let ns: Netns;
  beforeEach(() => { ns = new Netns('kmc'); });
  afterEach(() => ns?.destroy());

  const run = (...args: string[]) => {
    const r = spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, KPNG, 'migrate-check', '--hostname-override', 'n1', ...args], { encoding: 'utf8', timeout: 30000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  test('an iptables-mode node (iptables-nft and iptables-legacy rules): nothing a workload notices, the chains to go are counted', () => {
    ns.exec('iptables-nft', ['-t', 'nat', '-N', 'KUBE-SERVICES']);
    ns.exec('iptables-nft', ['-t', 'nat', '-N', 'KUBE-SVC-AAA']);
    ns.exec('iptables-nft', ['-t', 'nat', '-A', 'PREROUTING', '-j', 'KUBE-SERVICES']);
    ns.exec('iptables-nft', ['-t', 'nat', '-A', 'KUBE-SERVICES', '-d', '10.96.0.1/32', '-p', 'tcp', '--dport', '443', '-j', 'KUBE-SVC-AAA']);
    ns.exec('iptables-nft', ['-t', 'nat', '-A', 'KUBE-SVC-AAA', '-j', 'DNAT', '-p', 'tcp', '--to-destination', '10.0.0.1:6443']);
    ns.exec('iptables-legacy', ['-t', 'filter', '-N', 'KUBE-FORWARD']);
    ns.exec('iptables-legacy', ['-t', 'filter', '-A', 'FORWARD', '-j', 'KUBE-FORWARD']);
    ns.exec('iptables-legacy', ['-t', 'filter', '-A', 'KUBE-FORWARD', '-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'ACCEPT']);
    const before = `${ns.exec('iptables-nft-save', [])}${ns.exec('iptables-legacy-save', [])}`;
    const r = run();
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('kube-proxy\'s configuration from the command line: mode iptables');
    expect(r.stdout).toContain('iptables-nft: 2 chains of kube-proxy\'s (ip nat 2), 2 rules');
    expect(r.stdout).toContain('iptables-legacy: 1 chain of kube-proxy\'s (ip filter 1), 1 rule');
    expect(r.stdout).toMatch(/Changes a workload can notice:\n {2}none\n/);
    expect(r.stdout).toContain('see the 3 chains and 3 rules there now go away');
    // Read only: the rules are as they were.
    expect(`${ns.exec('iptables-nft-save', [])}${ns.exec('iptables-legacy-save', [])}`.replace(/^#.*\n/gm, '')).toBe(before.replace(/^#.*\n/gm, ''));
  });

  test('an nftables-mode node with kube-proxy still serving its health port, read with the config file', async () => {
    ns.nft('add', 'table', 'ip', 'kube-proxy');
    ns.nft('add', 'table', 'ip6', 'kube-proxy');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-mc-'));
    const conf = path.join(dir, 'config.conf');
    fs.writeFileSync(conf, 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nclusterCIDR: 10.244.0.0/16\n');
    ns.exec('ip', ['link', 'set', 'lo', 'up']);
    const server = spawn('ip', ['netns', 'exec', ns.name, process.execPath, '-e', 'require("net").createServer().listen(10256, () => console.log("listening"))']);
    await new Promise((resolve) => server.stdout.once('data', resolve));
    try {
      const r = run(`--config=${conf}`);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('nftables: table ip kube-proxy, ip6 kube-proxy');
      expect(r.stdout).toContain('ports 10249 and 10256: 10256 in use');
      expect(r.stdout).toMatch(/Before the switch:\n {2}- port 10256 is taken \(kube-proxy still running\?\)/);
      expect(ns.ruleset()).toMatch(/table ip kube-proxy/);
    } finally {
      server.kill();
      await new Promise((resolve) => server.once('exit', resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

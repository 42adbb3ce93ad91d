// cleanupNode({ which: 'upstream' }) after the real upstream kube-proxy (v1.37.1, hack/kube-proxy/)
// programmed a kcln- network namespace from a real loopback kube-apiserver, in nftables mode and in
// iptables mode (iptables-nft), then was stopped (it leaves its rules behind, as on a node that moves to
// kpng). Before it started, the namespace got rules of someone else in the nat and filter tables: they
// must survive, and no kube-proxy table or chain may be left.
//
// kube-proxy reaches the API server at the same https://127.0.0.1:PORT as in the kubeconfig: a forwarder
// in the namespace pipes each connection to a unix socket served by this process (unix sockets are not
// per namespace), which pipes it on to kube-apiserver. No link or route is added to the host.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { cleanupNode, isKubeProxyChain, type CleanupReport } from '../../src/cleanup';
import { createLogger } from '../../src/util/log';
import { Netns } from '../helpers/netns';
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { buildKubeProxy } from '../../bench/vs-upstream/proxies';
import { gated, need } from '../helpers/gate';
import { newEndpointSlice, newService, SERVICES, SLICES } from '../shared/objects';

const d = gated(need.netns(), need.native()).describe;

const FORWARDER = `
const net = require('node:net');
const [port, sock] = [Number(process.argv[1]), process.argv[2]];
net.createServer((c) => {
  const up = net.connect(sock);
  c.pipe(up).pipe(c);
  const close = () => { c.destroy(); up.destroy(); };
  c.on('error', close); up.on('error', close); c.on('close', close); up.on('close', close);
}).listen(port, '127.0.0.1', () => process.stdout.write('ready\\n'));
`;

/** Someone else's rules, made before kube-proxy starts: a chain in nat jumped to from PREROUTING, a filter rule. */
function addForeignRules(ns: Netns): void {
  const ipt = (...a: string[]) => ns.exec('iptables', ['-w', ...a]);
  ipt('-t', 'nat', '-N', 'KCLN-KEEP');
  ipt('-t', 'nat', '-A', 'KCLN-KEEP', '-s', '192.0.2.9/32', '-j', 'ACCEPT');
  ipt('-t', 'nat', '-A', 'PREROUTING', '-j', 'KCLN-KEEP');
  ipt('-t', 'filter', '-A', 'INPUT', '-s', '192.0.2.7/32', '-j', 'DROP');
}

function expectForeignRulesKept(ruleset: string): void {
  expect(ruleset).toContain('jump KCLN-KEEP');
  expect(ruleset).toContain('ip saddr 192.0.2.9 counter packets 0 bytes 0 accept');
  expect(ruleset).toContain('ip saddr 192.0.2.7 counter packets 0 bytes 0 drop');
}

/** Chain names in `nft list ruleset` output. */
const chainNames = (ruleset: string): string[] => [...ruleset.matchAll(/^\s*chain (\S+) \{/gm)].map((m) => m[1]);

class UpstreamProxy {
  readonly ns = new Netns('kcln');
  readonly lines: string[] = [];
  private bridge?: net.Server;
  private forwarder?: ChildProcess;
  private proxy?: ChildProcess;
  private readonly sock = path.join(os.tmpdir(), `${this.ns.name}.sock`);

  constructor(readonly mode: 'nftables' | 'iptables') {}

  async start(cp: ControlPlane, bin: string): Promise<void> {
    const apiPort = Number(new URL(cp.server).port);
    fs.rmSync(this.sock, { force: true });
    this.bridge = net.createServer((c) => {
      const up = net.connect(apiPort, '127.0.0.1');
      c.pipe(up).pipe(c);
      const close = () => { c.destroy(); up.destroy(); };
      c.on('error', close); up.on('error', close); c.on('close', close); up.on('close', close);
    });
    await new Promise<void>((resolve, reject) => { this.bridge!.once('error', reject); this.bridge!.listen(this.sock, resolve); });
    const fwd = spawn('ip', ['netns', 'exec', this.ns.name, process.execPath, '-e', FORWARDER, String(apiPort), this.sock], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.forwarder = fwd;
    await new Promise<void>((resolve, reject) => {
      fwd.stdout!.on('data', (b) => { if (String(b).includes('ready')) resolve(); });
      fwd.once('exit', (code) => reject(new Error(`forwarder in ${this.ns.name} exited (${code})`)));
    });
    addForeignRules(this.ns);
    const p = spawn('ip', ['netns', 'exec', this.ns.name, bin, `--proxy-mode=${this.mode}`, `--kubeconfig=${cp.kubeconfigPath}`,
      '--hostname-override=n1', '--cluster-cidr=10.244.0.0/16',
      // The conntrack table size is global to the host: leave it alone.
      '--conntrack-max-per-core=0', '--oom-score-adj=0', '--v=0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proxy = p;
    const keep = (b: Buffer) => { this.lines.push(...String(b).split('\n').filter(Boolean)); };
    p.stdout!.on('data', keep);
    p.stderr!.on('data', keep);
  }

  /** Waits until kube-proxy's rules for this cluster IP are in the kernel (or it exits). */
  async waitProgrammed(clusterIP: string, timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const rules = this.ns.ruleset();
      const done = this.mode === 'nftables' ? /table ip kube-proxy/.test(rules) && rules.includes(clusterIP) : rules.includes(`ip daddr ${clusterIP}`) && rules.includes('KUBE-SVC-');
      if (done) return;
      if (this.proxy?.exitCode !== null || Date.now() > deadline) {
        throw new Error(`kube-proxy (${this.mode}) did not program ${clusterIP}; its log:\n${this.lines.slice(-40).join('\n')}\nruleset:\n${rules}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Stops kube-proxy (SIGTERM: it leaves its rules, as when a node moves to another proxy). */
  async stopProxy(): Promise<void> {
    const p = this.proxy;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(t);
  }

  async destroy(): Promise<void> {
    await this.stopProxy();
    this.forwarder?.kill('SIGKILL');
    this.bridge?.close();
    fs.rmSync(this.sock, { force: true });
    this.ns.destroy();
  }
}

d('kpng --cleanup: what upstream kube-proxy leaves', () => {
  let cp: ControlPlane;
  const proxies: Partial<Record<'nftables' | 'iptables', UpstreamProxy>> = {};
  let clusterIP = '';
  const log = createLogger('error', () => {});

  beforeAll(async () => {
    const bin = buildKubeProxy();
    cp = await startControlPlane({ log: () => {} });
    const ok = (r: { status: number; text: string }) => { if (r.status >= 300) throw new Error(`API: ${r.status} ${r.text}`); };
    ok(await cp.request('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } }));
    for (const [name, type] of [['web', 'ClusterIP'], ['np', 'NodePort'], ['none', 'ClusterIP']] as const) {
      const r = await cp.request('POST', SERVICES('default'), newService(name, { type }));
      ok(r);
      if (name === 'web') clusterIP = r.body.spec.clusterIP;
      if (name === 'none') continue; // no endpoints: kube-proxy rejects its traffic
      ok(await cp.request('POST', SLICES('default'), newEndpointSlice(`${name}-1`, name, [{ ip: '10.244.1.10', nodeName: 'n1' }, { ip: '10.244.2.10', nodeName: 'n2' }])));
    }
    for (const mode of ['nftables', 'iptables'] as const) {
      proxies[mode] = new UpstreamProxy(mode);
      await proxies[mode]!.start(cp, bin);
    }
    await Promise.all(Object.values(proxies).map((p) => p.waitProgrammed(clusterIP)));
    for (const p of Object.values(proxies)) await p.stopProxy();
  }, 600_000);

  afterAll(async () => {
    for (const p of Object.values(proxies)) await p.destroy();
    await cp?.stop();
  }, 60_000);

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts) {
      for (const p of Object.values(proxies)) {
        // eslint-disable-next-line no-console
        console.log(`kube-proxy (${p.mode}) log:\n${p.lines.slice(-30).join('\n')}\nruleset now:\n${p.ns.ruleset()}`);
      }
    }
  });

  const cleanup = (p: UpstreamProxy): Promise<CleanupReport> => cleanupNode({ log, which: 'upstream', netns: p.ns.path });

  test('nftables mode: the kube-proxy tables go, other rules stay', async () => {
    const p = proxies.nftables!;
    const report = await cleanup(p);
    expect(report.errors).toEqual([]);
    expect(report.tables).toContain('ip kube-proxy');
    expect(report.tables.every((t) => /^ip6? kube-proxy$/.test(t))).toBe(true);
    const left = p.ns.ruleset();
    expect(left).not.toContain('kube-proxy');
    expect(left).not.toContain(clusterIP);
    expect(chainNames(left).filter(isKubeProxyChain)).toEqual([]);
    expectForeignRulesKept(left);
    const again = await cleanup(p);
    expect([again.errors, again.tables, again.chains]).toEqual([[], [], []]);
  }, 60_000);

  test('iptables mode: the KUBE- chains and the jumps to them go, other rules and the tables stay', async () => {
    const p = proxies.iptables!;
    const before = p.ns.ruleset();
    const kubeChainsBefore = chainNames(before).filter(isKubeProxyChain);
    expect(kubeChainsBefore).toEqual(expect.arrayContaining(['KUBE-SERVICES', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ']));
    expect(kubeChainsBefore.some((c) => c.startsWith('KUBE-SVC-'))).toBe(true);
    expect(kubeChainsBefore.some((c) => c.startsWith('KUBE-SEP-'))).toBe(true);

    const report = await cleanup(p);
    expect(report.errors).toEqual([]);
    expect(report.chains).toEqual(expect.arrayContaining(['ip nat KUBE-SERVICES', 'ip nat KUBE-POSTROUTING', 'ip filter KUBE-FORWARD']));
    // nat PREROUTING, OUTPUT, POSTROUTING; filter INPUT, FORWARD, OUTPUT: at least those in ip.
    expect(report.jumpRules).toBeGreaterThanOrEqual(6);
    const left = p.ns.ruleset();
    expect(chainNames(left).filter(isKubeProxyChain)).toEqual([]);
    expect(left).not.toContain(clusterIP);
    expect(left).toMatch(/table ip nat \{/);
    expect(left).toMatch(/table ip filter \{/);
    expectForeignRulesKept(left);
    // iptables itself still reads what is left.
    expect(p.ns.exec('iptables', ['-w', '-t', 'nat', '-S'])).toContain('-A PREROUTING -j KCLN-KEEP');
    const again = await cleanup(p);
    expect([again.errors, again.tables, again.chains, again.jumpRules]).toEqual([[], [], [], 0]);
  }, 60_000);
});

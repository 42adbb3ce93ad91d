// Migrating a node between upstream kube-proxy and kpng, both ways, with a client connecting without a
// pause: no connection may fail, and each proxy's rules are gone once the other has taken over. The node
// is a network namespace reaching a real kube-apiserver (the benchmark's lab, bench/vs-upstream/lab.ts);
// the endpoint is a "pod" namespace behind a veth; upstream kube-proxy v1.37 is built from Go modules
// (hack/kube-proxy/build.sh). kube-proxy runs in nftables mode, and in iptables mode with either
// iptables (iptables-nft, iptables-legacy: the `iptables` it finds on its PATH, as its image's wrapper
// picks one); kpng gets the same --proxy-mode. docs/migration.md follows this test step by step.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Lab } from '../../bench/vs-upstream/lab';
import { buildKubeProxy } from '../../bench/vs-upstream/proxies';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';
import { KPNG } from '../helpers/cli';
import { waitFor } from '../helpers/wait';
import { NetLab } from '../shared/netlab';
import { startControlPlane, type ControlPlane } from './support/controlplane';


const POD_IP = '10.244.1.5';

// A TCP echo server (the pod) and a client that opens a new connection every 20 ms and also keeps one
// connection open, writing to it every 100 ms. Every failure is a line "fail <what>"; "ok N" every second.
const SERVER = `require('net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(8080, '0.0.0.0', () => console.log('ready'));`;
const CLIENT = `
const net = require('net');
const [ip, port] = [process.argv[2], Number(process.argv[3])];
let ok = 0;
const fail = (what) => console.log('fail ' + what);
function once() {
  const s = net.connect({ host: ip, port, timeout: 2000 });
  let got = '';
  s.on('connect', () => s.write('ping'));
  s.on('data', (d) => { got += d; if (got === 'ping') { ok++; s.end(); } });
  s.on('timeout', () => { fail('timeout'); s.destroy(); });
  s.on('error', (e) => fail('new ' + e.code));
}
setInterval(once, 20);
const long = net.connect({ host: ip, port });
let n = 0, echoed = '';
long.on('error', (e) => fail('long ' + e.code));
long.on('close', () => fail('long closed'));
long.on('data', (d) => { echoed += d; });
setInterval(() => { const m = 'm' + (n++) + ';'; long.write(m); }, 100);
setInterval(() => console.log('ok ' + ok + ' long ' + echoed.split(';').length), 1000);
`;

/** kube-proxy's mode, and for iptables mode the iptables it runs. */
interface Mode { proxyMode: 'nftables' | 'iptables'; xtables?: 'nft' | 'legacy' }
const MODES: Array<[string, Mode]> = [
  ['nftables mode', { proxyMode: 'nftables' }],
  ['iptables mode (iptables-nft)', { proxyMode: 'iptables', xtables: 'nft' }],
  ['iptables mode (iptables-legacy)', { proxyMode: 'iptables', xtables: 'legacy' }],
];
/** Chains the kubelet makes and keeps, whatever the proxy (kpng's clean-up leaves them too). */
const KUBELET_CHAINS = /KUBE-(FIREWALL|KUBELET-CANARY|IPTABLES-HINT)\b/;

let upstream: string;
let dir: string;
beforeAll(() => {
  upstream = buildKubeProxy();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-migration-'));
  fs.writeFileSync(path.join(dir, 'client.js'), CLIENT);
  // PATH directories whose iptables, iptables-save, iptables-restore (and ip6) are one variant.
  for (const v of ['nft', 'legacy']) {
    fs.mkdirSync(path.join(dir, v));
    for (const tool of ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore']) {
      const [base, ...rest] = tool.split('-');
      fs.symlinkSync(`/usr/sbin/${[base, v, ...rest].join('-')}`, path.join(dir, v, tool));
    }
  }
}, 600_000);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function sh(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Lines of a child's stdout and stderr, kept. */
function collect(p: ChildProcess, lines: string[]): void {
  for (const s of [p.stdout, p.stderr]) {
    let buf = '';
    s?.on('data', (d: Buffer) => { buf += d; const parts = buf.split('\n'); buf = parts.pop()!; lines.push(...parts); });
  }
}

test.each(MODES)('kube-proxy (%s) -> kpng -> kube-proxy on a live node: no failed connection, no leftovers', async (_name, mode) => {
  let cp: ControlPlane | undefined;
  let lab: Lab | undefined;
  const pods = new NetLab('kmig');
  const children: ChildProcess[] = [];
  const track = <T extends ChildProcess>(p: T): T => { children.push(p); return p; };
  const stop = async (p: ChildProcess | undefined) => {
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await exited;
  };
  try {
    cp = await startControlPlane({ log: () => {} });
    const ok = async (p: Promise<{ status: number; text: string; body?: any }>) => { const r = await p; if (r.status >= 300) throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`); return r.body; };
    await ok(cp.request('POST', NODES, newNode('n1', 'zone-a')));
    await ok(cp.request('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date())));
    const clusterIP: string = (await ok(cp.request('POST', SERVICES('default'), newService('web')))).spec.clusterIP;
    await ok(cp.request('POST', SLICES('default'), newEndpointSlice('web-abc', 'web', [{ ip: POD_IP, nodeName: 'n1' }])));

    lab = await Lab.create('kmig', Number(new URL(cp.server).port));
    const inNode = (args: string[]) => sh('ip', ['netns', 'exec', lab!.netns, ...args]);
    // The pod: its own namespace behind a veth, serving on 8080.
    const podNs = pods.netns('pod');
    pods.veth({ ns: lab.netns, name: 'kmig-veth', addrs: ['10.244.1.1/24'] }, { ns: podNs, name: 'eth0', addrs: [`${POD_IP}/24`] });
    // A node has a default route: connect() to a cluster IP needs one before the output hook's DNAT.
    inNode(['ip', 'route', 'add', 'default', 'dev', 'kmig-veth']);
    const server = track(spawn('ip', ['netns', 'exec', podNs, process.execPath, '-e', SERVER], { stdio: ['ignore', 'pipe', 'pipe'] }));

    const serverOut: string[] = [];
    collect(server, serverOut);
    await waitFor('the pod\'s server', () => serverOut.includes('ready'));

    const kubeconfig = cp.kubeconfigPath;
    const env = mode.xtables ? { ...process.env, PATH: `${path.join(dir, mode.xtables)}:${process.env.PATH}` } : process.env;
    const startUpstream = () => {
      const p = track(spawn('ip', ['netns', 'exec', lab!.netns, upstream, `--proxy-mode=${mode.proxyMode}`, `--kubeconfig=${kubeconfig}`, '--hostname-override=n1',
        '--cluster-cidr=10.244.0.0/16', '--conntrack-max-per-core=0', '--oom-score-adj=0', '--metrics-bind-address=127.0.0.1:10249', '--healthz-bind-address=127.0.0.1:10256'],
      { stdio: ['ignore', 'pipe', 'pipe'], env }));
      return p;
    };
    const startKpng = () => {
      const p = track(spawn('ip', ['netns', 'exec', lab!.netns, process.execPath, KPNG, `--proxy-mode=${mode.proxyMode}`, `--kubeconfig=${kubeconfig}`, '--hostname-override=n1',
        '--cluster-cidr=10.244.0.0/16', '--conntrack-max-per-core=0', '--oom-score-adj=0', '--metrics-bind-address=127.0.0.1:10349', '--healthz-bind-address=127.0.0.1:10356'],
      { stdio: ['ignore', 'pipe', 'pipe'] }));
      return p;
    };
    const netns = lab.netns;
    const table = (name: string) => spawnSync('ip', ['netns', 'exec', netns, 'nft', 'list', 'table', 'ip', name], { encoding: 'utf8' }).stdout;
    // kube-proxy's rules in iptables, both variants (kpng's clean-up must find them wherever they are).
    const xtables = (variants = ['nft', 'legacy']) => variants.flatMap((v) => ['iptables', 'ip6tables'].map((t) => spawnSync('ip', ['netns', 'exec', netns, `${t}-${v}-save`], { encoding: 'utf8' }).stdout)).join('');
    const upstreamRules = () => (mode.proxyMode === 'nftables' ? table('kube-proxy') : xtables().split('\n').filter((l) => /KUBE-/.test(l) && !KUBELET_CHAINS.test(l)).join('\n'));
    const serves = (name: string) => () => (name === 'kube-proxy' ? upstreamRules() : table(name)).includes(clusterIP);

    // 1. kube-proxy serves the node; the client starts.
    let kubeProxy = startUpstream();
    await waitFor('kube-proxy\'s rules', serves('kube-proxy'), 60_000);
    // In the iptables kube-proxy was given, and only there.
    if (mode.xtables) {
      expect(xtables([mode.xtables])).toContain(`-d ${clusterIP}/32`);
      expect(xtables([mode.xtables === 'nft' ? 'legacy' : 'nft'])).not.toContain(clusterIP);
    }
    const client = track(spawn('ip', ['netns', 'exec', lab.netns, process.execPath, path.join(dir, 'client.js'), clusterIP, '80'], { stdio: ['ignore', 'pipe', 'pipe'] }));

    const clientOut: string[] = [];
    collect(client, clientOut);
    const okCount = () => { const l = clientOut.filter((x) => x.startsWith('ok ')).pop(); return l ? Number(l.split(' ')[1]) : 0; };
    const failures = () => clientOut.filter((l) => l.startsWith('fail'));
    const state = () => `client: ${clientOut.slice(-5).join(' | ')}`;
    await waitFor('connections through kube-proxy', () => okCount() > 20, 20_000).catch((e) => { throw new Error(`${e.message}; ${state()}`); });

    // 2. kpng starts beside it, then kube-proxy stops; kpng removes kube-proxy's rules after its first sync.
    const kpngLines: string[] = [];
    const kpng = startKpng();
    collect(kpng, kpngLines);
    await waitFor('kpng\'s rules', serves('kpng'), 60_000);
    await stop(kubeProxy);
    await waitFor('kube-proxy\'s rules removed by kpng', () => upstreamRules() === '', 30_000);
    const before = okCount();
    await waitFor('connections through kpng alone', () => okCount() > before + 100, 20_000);
    expect(failures()).toEqual([]);

    // A kube-proxy still running at kpng's first clean-up writes its rules back at its next sync
    // before it stops: kpng looks again (10 s after its first clean-up, then 30 and 60 s) and removes them.
    if (mode.proxyMode === 'nftables') {
      inNode(['nft', 'add', 'table', 'ip', 'kube-proxy']);
      inNode(['nft', 'add', 'chain', 'ip', 'kube-proxy', 'services']);
      await waitFor('kube-proxy\'s late table removed again', () => table('kube-proxy') === '', 40_000);
      await waitFor('kpng\'s log line', () => kpngLines.some((l) => /kube-proxy's rules were back after the first clean-up/.test(l)), 5_000);
    }

    // 3. Back: kube-proxy starts beside kpng, kpng stops, and `kpng --cleanup-only=kpng` removes kpng's
    //    rules (kube-proxy's stay).
    kubeProxy = startUpstream();
    await waitFor('kube-proxy\'s rules again', serves('kube-proxy'), 60_000);
    await stop(kpng);
    const cleanup = spawnSync('ip', ['netns', 'exec', lab.netns, process.execPath, KPNG, '--cleanup', '--cleanup-only=kpng'], { encoding: 'utf8' });
    expect({ status: cleanup.status, stderr: cleanup.stderr }).toEqual({ status: 0, stderr: expect.stringMatching(/removed/) });
    expect(table('kpng')).toBe('');
    const before2 = okCount();
    await waitFor('connections through kube-proxy alone', () => okCount() > before2 + 100, 20_000);
    expect(failures()).toEqual([]);

    // The long-lived connection carried messages through every hand-over.
    const longEchoed = () => { const l = clientOut.filter((x) => x.startsWith('ok ')).pop(); return l ? Number(l.split(' ')[3]) : 0; };
    expect(longEchoed()).toBeGreaterThan(50);

    // 4. Finally `kpng --cleanup` leaves the node as before either proxy ran.
    await stop(kubeProxy);
    await stop(client);
    const all = spawnSync('ip', ['netns', 'exec', lab.netns, process.execPath, KPNG, '--cleanup'], { encoding: 'utf8' });
    expect(all.status).toBe(0);
    expect(upstreamRules()).toBe('');
    // iptables-nft's own tables (filter, nat, ...) stay, empty of kube-proxy's chains; no proxy's table is left.
    expect(inNode(['nft', 'list', 'tables']).split('\n').filter((l) => /kpng|kube-proxy/.test(l))).toEqual([]);
    if (mode.proxyMode === 'nftables') expect(inNode(['nft', 'list', 'ruleset']).trim()).toBe('');
  } finally {
    for (const c of children.reverse()) await stop(c);
    await lab?.stop();
    pods.destroy();
    await cp?.stop();
  }
}, 300_000);

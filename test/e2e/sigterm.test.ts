// SIGTERM ends `kpng kube --to nft` promptly whatever it is doing, with exit code 0, and leaves the
// rules it programmed in the kernel (as upstream kube-proxy does: a restart must not open a window
// without service rules). Each state runs kpng in its own network namespace (klif-*) reaching a real
// kube-apiserver on the host's loopback through bench/vs-upstream's forwarder.
//
// Time is not asserted: the harness gives the process a generous bound to exit, and the measured
// SIGTERM-to-exit times are printed at the end (the issue's target is 2 s; before the fix kpng never
// exited before its first sync and took tens of seconds in other states).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { Lab } from '../../bench/vs-upstream/lab';
import { nodeBinary } from '../shared/kpng-process';
import { KpngProcess } from '../shared/kpng-process';
import { ipv4Allocator, putAll, storedService, storedSlice, waitListed } from '../../bench/vs-upstream/etcd-fill';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';

// Lab names its namespaces <prefix>-<tag>: this file's are klif-*.
process.env.KPNG_BENCH_NETNS_PREFIX = 'klif';

/** How long the harness lets a process take to exit after SIGTERM before calling it hung. */
const EXIT_BOUND_MS = 15_000;
const measured: { state: string; ms: number; code: number | null }[] = [];

/** kpng inside a lab's namespace, started by the lab (its stopProxy ends it too). */
function startKpng(lab: Lab, kubeconfig: string, extra: string[] = []): KpngProcess {
  return new KpngProcess(['kube', '--kubeconfig', kubeconfig, '--node', 'n1', '--to', 'nft',
    '--healthz-bind-address', '127.0.0.1:0', '--metrics-bind-address', '127.0.0.1:0', '--log-level', 'debug', ...extra],
  { spawn: (argv) => lab.startProxy(argv), node: nodeBinary(), testServers: false });
}

/** Until kpng's stderr has a line matching `re` at index >= `from`. */
const logged = (k: KpngProcess, re: RegExp, from = 0, timeoutMs = 60_000) => k.waitForLine(re, { from, timeoutMs, stream: 'stderr' });

/** SIGTERM; resolves with the exit code and signal and records the time taken; rejects if kpng does not
 *  exit within the bound. */
async function terminate(k: KpngProcess, state: string): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const t0 = performance.now();
  await k.stop('SIGTERM', EXIT_BOUND_MS);
  const r = await k.exit;
  measured.push({ state, ms: Math.round(performance.now() - t0), code: r.code });
  return r;
}

/** `nft list tables` and the IPv4 table inside the namespace (kpng's rules after it exited). */
function tables(lab: Lab): string {
  return execFileSync('ip', ['netns', 'exec', lab.netns, 'nft', 'list', 'tables'], { encoding: 'utf8' });
}
function ipTable(lab: Lab): string {
  return execFileSync('ip', ['netns', 'exec', lab.netns, 'nft', 'list', 'table', 'ip', 'kpng'], { encoding: 'utf8' });
}

describe('SIGTERM ends kpng in every state and leaves its rules', () => {
  let cp: ControlPlane;
  let apiPort: number;
  let clusterIP: string;
  let dir: string;
  const labs: Lab[] = [];

  /** The test control plane's kubeconfig with another server URL or token. */
  const kubeconfig = (name: string, change: { server?: string; token?: string }): string => {
    const kc = JSON.parse(fs.readFileSync(cp.kubeconfigPath, 'utf8'));
    if (change.server) kc.clusters[0].cluster.server = change.server;
    if (change.token) kc.users[0].user.token = change.token;
    const file = path.join(dir, name);
    fs.writeFileSync(file, JSON.stringify(kc));
    return file;
  };
  const lab = async (tag: string) => {
    const l = await Lab.create(`${tag}-${process.pid % 10000}`, apiPort);
    labs.push(l);
    return l;
  };
  const must = async (method: string, p: string, body?: unknown) => {
    const r = await cp.request(method, p, body);
    if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${p}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    return r.body;
  };

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'klif-sigterm-'));
    cp = await startControlPlane({ log: () => {}, serviceClusterIPRange: '10.96.0.0/12' });
    apiPort = Number(new URL(cp.server).port);
    await must('POST', NODES, newNode('n1', 'zone-a'));
    await must('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date()));
    const svc = await must('POST', SERVICES('default'), newService('web'));
    clusterIP = svc.spec.clusterIP;
    await must('POST', SLICES('default'), newEndpointSlice('web-1', 'web', [{ ip: '10.244.0.7', nodeName: 'n1' }]));
  }, 180_000);

  afterAll(async () => {
    for (const l of labs) await l.stop().catch(() => undefined);
    await cp?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    if (measured.length) console.log(`SIGTERM to exit:\n${measured.map((m) => `  ${m.state}: ${m.ms} ms (exit code ${m.code})`).join('\n')}`);
  }, 120_000);

  /** Starts kpng, waits for its first sync, checks the service's rules are in. */
  const synced = async (tag: string) => {
    const l = await lab(tag);
    const k = startKpng(l, cp.kubeconfigPath);
    await logged(k, /nft: synced revision \d+/);
    expect(ipTable(l)).toContain(clusterIP);
    return { l, k };
  };

  test('API server unreachable from the start (connection refused): exits, code 0', async () => {
    const l = await lab('refused');
    // Nothing listens on this port in the namespace.
    const k = startKpng(l, kubeconfig('refused', { server: 'https://127.0.0.1:1' }));
    await logged(k, /watch-list failed: .*ECONNREFUSED.*again in/);
    await logged(k, /watch-list failed: .*again in/, k.stderr.length); // a retry is pending
    expect(await terminate(k, 'unreachable from the start (refused)')).toEqual({ code: 0, signal: null });
  }, 90_000);

  test('API server unreachable from the start (packets dropped, connect hangs): exits, code 0', async () => {
    const l = await lab('blackhole');
    // 10.255.0.1 is local (the /24 on lo) but every packet to it is dropped on input: the TCP connect
    // neither succeeds nor fails, as for a server behind a firewall that drops.
    execFileSync('ip', ['netns', 'exec', l.netns, 'ip', 'addr', 'add', '10.255.0.2/24', 'dev', 'lo']);
    execFileSync('ip', ['netns', 'exec', l.netns, 'nft', '-f', '-'], { input: 'table ip klif {\n chain inbound {\n type filter hook input priority 0\n ip daddr 10.255.0.1 drop\n }\n}\n' });
    const k = startKpng(l, kubeconfig('blackhole', { server: 'https://10.255.0.1:6443' }));
    await logged(k, /kube: API server https:\/\/10\.255\.0\.1:6443/);
    await new Promise((r) => setTimeout(r, 1000)); // the connects are in flight
    expect(k.stderr.some((x) => /failed/.test(x))).toBe(false); // and neither succeeded nor failed
    expect(await terminate(k, 'unreachable from the start (connect hangs)')).toEqual({ code: 0, signal: null });
  }, 90_000);

  test('before the first sync (every list refused with 403): exits, code 0', async () => {
    // A service account without any RBAC binding: authenticated, forbidden to list anything.
    await must('POST', '/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'klif-nobody' } });
    const tr = await must('POST', '/api/v1/namespaces/default/serviceaccounts/klif-nobody/token', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } });
    const l = await lab('forbidden');
    const k = startKpng(l, kubeconfig('forbidden', { token: tr.status.token }));
    await logged(k, /failed: HTTP 403/);
    expect(await terminate(k, 'before the first sync (403)')).toEqual({ code: 0, signal: null });
    expect(k.stderr.some((l2) => /nft: synced revision/.test(l2))).toBe(false);
  }, 90_000);

  test('steady state after the first sync: exits, code 0, rules stay', async () => {
    const { l, k } = await synced('steady');
    await new Promise((r) => setTimeout(r, 1000)); // idle, watches open
    expect(await terminate(k, 'steady state after sync')).toEqual({ code: 0, signal: null });
    expect(tables(l)).toMatch(/table ip kpng/);
    expect(ipTable(l)).toContain(clusterIP);
  }, 90_000);

  test('API server gone after a good start: exits, code 0, rules stay', async () => {
    const { l, k } = await synced('gone');
    const mark = k.stderr.length;
    await cp.stopApiServer();
    try {
      await logged(k, /kube: Services: watch failed: .*; resuming the watch .* in \d+ ms/, mark);
      expect(await terminate(k, 'API server gone after sync')).toEqual({ code: 0, signal: null });
    } finally {
      await cp.startApiServer();
    }
    expect(ipTable(l)).toContain(clusterIP);
  }, 120_000);

  test('API server frozen after a good start (open watches, no answers): exits, code 0, rules stay', async () => {
    const { l, k } = await synced('frozen');
    const pid = apiServerPid(cp);
    process.kill(pid, 'SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, 1000));
      expect(await terminate(k, 'API server frozen after sync')).toEqual({ code: 0, signal: null });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(ipTable(l)).toContain(clusterIP);
  }, 120_000);

  test('during the first full sync of a large cluster: exits, code 0', async () => {
    // Written into etcd directly: creating this many Services through the API takes minutes.
    const n = 20_000;
    const ip = ipv4Allocator('10.96.0.0/12');
    const objects = [];
    for (let i = 0; i < n; i++) {
      objects.push(storedService('default', `big-${i}`, ip()));
      objects.push(storedSlice('default', newEndpointSlice(`big-${i}-1`, `big-${i}`, [{ ip: `10.245.${i >> 8}.${i & 255}`, nodeName: 'n1' }, { ip: `10.246.${i >> 8}.${i & 255}`, nodeName: 'n2' }])));
    }
    await putAll(cp.etcdEndpoint, objects);
    await waitListed(cp, 'default', n + 2, n + 1); // and the kubernetes and web Services, web's slice
    const l = await lab('large');
    const k = startKpng(l, cp.kubeconfigPath);
    // The lists are applied: the first sync (thousands of rules) starts now.
    await logged(k, /kube: every initial list applied; the state is synced/, 0, 180_000);
    const mark = k.stderr.length;
    const r = await terminate(k, 'during the first full sync (20k services)');
    expect(r).toEqual({ code: 0, signal: null });
    // Said so when the sync had not ended when SIGTERM came (the interesting case).
    console.log(`large cluster: ${k.stderr.slice(mark).some((x) => /nft: synced revision/.test(x)) ? 'the sync ended before exit' : 'exited inside the sync'}; tables after exit: ${tables(l).trim().replace(/\n/g, ', ')}`);
  }, 600_000);
});

function apiServerPid(cp: ControlPlane): number {
  const port = new URL(cp.server).port;
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  const line = out.split('\n').find((l) => l.includes('kube-apiserver') && l.includes(`--secure-port=${port}`));
  if (!line) throw new Error(`no kube-apiserver process with --secure-port=${port}`);
  return Number(line.trim().split(/\s+/)[0]);
}

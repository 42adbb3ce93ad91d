// The kube source when the API server goes away, when its history is compacted (410 Gone) and
// when it freezes: kpng (a child process, `--to trace`) converges to exactly what a fresh list
// gives, with the objects deleted meanwhile deleted. When packets to the API server are dropped (a
// partition, not a refusal), kpng retries as soon as the server can be reached again.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { gated, need } from '../helpers/gate';
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { KpngTrace, kpngOnce, traceState } from '../shared/kpng-trace';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';

const NS = 'default';

async function ok(p: Promise<{ status: number; text: string }>, what: string): Promise<any> {
  const r = await p;
  if (r.status < 200 || r.status >= 300) throw new Error(`${what}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  return (r as any).body;
}

describe('kube source resilience', () => {
  let cp: ControlPlane;
  const children: KpngTrace[] = [];

  const mk = async (name: string, ips: string[]) => {
    await ok(cp.request('POST', SERVICES(NS), newService(name)), `create svc ${name}`);
    await ok(cp.request('POST', SLICES(NS), newEndpointSlice(`${name}-1`, name, ips.map((ip) => ({ ip })))), `create slice ${name}`);
  };
  const del = (path: string) => ok(cp.request('DELETE', path), `delete ${path}`);
  const setEndpoints = (slice: string, ips: string[]) =>
    ok(cp.request('PATCH', `${SLICES(NS)}/${slice}`, { endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })) }), `patch ${slice}`);

  const start = (env: Record<string, string> = {}) => {
    const k = new KpngTrace({ kubeconfig: cp.kubeconfigPath, node: 'n1', args: ['--min-sync-period', '0', '--log-level', 'debug'], env });
    children.push(k);
    return k;
  };

  /** The long-running kpng's state equals a fresh `kpng kube --once` (waits for it to get there). */
  const expectConverged = async (k: KpngTrace) => {
    const fresh = await kpngOnce(cp.kubeconfigPath, 'n1', ['--to', 'trace']);
    expect(fresh.code).toBe(0);
    const want = new Map([...traceState(fresh.stdout)].sort());
    await k.waitFor('the state of a fresh list', () => JSON.stringify([...new Map([...k.state].sort())]) === JSON.stringify([...want]), 20_000);
    expect(new Map([...k.state].sort())).toEqual(want);
  };

  beforeAll(async () => {
    cp = await startControlPlane({ log: () => {} });
    await ok(cp.request('POST', NODES, newNode('n1', 'zone-a')), 'create node');
    await ok(cp.request('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date())), 'node status');
  }, 180_000);

  afterAll(async () => {
    for (const k of children) await k.stop();
    await cp?.stop();
  }, 60_000);

  test('kube-apiserver restarts: kpng resumes (or relists) and converges with nothing stale', async () => {
    await mk('keep', ['10.244.0.1']);
    await mk('drop', ['10.244.0.2']);
    const k = start();
    await k.waitForItem('svc/default/drop', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.0.2:8080]');
    const mark = k.stderr.length;

    await cp.stopApiServer();
    await k.waitForStderr(/kube: Services: watch failed/, mark, 20_000);
    await cp.startApiServer();

    // Changes after the restart: a delete, an update, a create.
    await del(`${SERVICES(NS)}/drop`);
    await setEndpoints('keep-1', ['10.244.0.1', '10.244.0.3']);
    await mk('new', ['10.244.0.4']);

    await k.waitForGone('svc/default/drop', 30_000);
    await k.waitForItem('svc/default/keep', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.0.1:8080,10.244.0.3:8080]', 30_000);
    await k.waitForItem('svc/default/new', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.0.4:8080]', 30_000);
    await expectConverged(k);
    await k.stop();
  }, 120_000);

  test('410 Gone after compaction: kpng relists and deletes what vanished while it was away', async () => {
    await mk('gone-a', ['10.244.1.1']);
    await mk('gone-b', ['10.244.1.2']);
    await mk('stay', ['10.244.1.3']);
    const k = start();
    await k.waitForItem('svc/default/stay', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.1.3:8080]');
    await k.waitForItem('svc/default/gone-a', /10\.244\.1\.1/);
    const mark = k.stderr.length;

    // kpng loses the server and is then frozen, so it cannot follow what happens next.
    await cp.stopApiServer();
    await k.waitFor('every watch to fail', () => ['Services', 'EndpointSlices', 'Node n1'].every((w) => k.stderr.slice(mark).some((l) => l.includes(`kube: ${w}: watch failed`))), 20_000);
    process.kill(k.pid, 'SIGSTOP');
    try {
      await cp.startApiServer();
      await del(`${SERVICES(NS)}/gone-a`);
      await del(`${SLICES(NS)}/gone-a-1`);
      await del(`${SLICES(NS)}/gone-b-1`);
      await setEndpoints('stay-1', ['10.244.1.4']);
      await mk('born', ['10.244.1.5']);
      // Compact etcd and restart the server: its watch cache now starts after kpng's
      // resourceVersion, and etcd no longer has the history either.
      await cp.compactEtcd();
      await cp.stopApiServer();
      await cp.startApiServer();
    } finally {
      process.kill(k.pid, 'SIGCONT');
    }

    await k.waitForStderr(/kube: Services: resourceVersion \d+ expired \(410 Gone\): relisting/, mark, 60_000);
    await k.waitForStderr(/kube: EndpointSlices: resourceVersion \d+ expired \(410 Gone\): relisting/, mark, 60_000);
    await k.waitForStderr(/kube: relisted \d+ Services/, mark, 30_000);
    await k.waitForStderr(/kube: relisted \d+ EndpointSlices/, mark, 30_000);
    await k.waitForGone('svc/default/gone-a', 30_000);
    await k.waitForItem('svc/default/gone-b', 'ClusterIP 80/TCP cluster-ip=reject', 30_000);
    await k.waitForItem('svc/default/stay', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.1.4:8080]', 30_000);
    await k.waitForItem('svc/default/born', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.1.5:8080]', 30_000);
    expect(k.lines.slice(0)).toContain('delete svc/default/gone-a');
    await expectConverged(k);
    await k.stop();
  }, 180_000);

  test('a frozen kube-apiserver: the watchdog tears silent watches down, kpng recovers when it thaws', async () => {
    const k = start({ KPNG_KUBE_IDLE_TIMEOUT_MS: '2000', KPNG_KUBE_REQUEST_TIMEOUT_MS: '2000' });
    await k.waitFor('first sync', () => k.syncs.length > 0, 30_000);
    const mark = k.stderr.length;
    const pid = apiServerPid(cp);
    process.kill(pid, 'SIGSTOP');
    try {
      await k.waitForStderr(/kube: Services: watch failed: watch silent for 2 s \(watchdog\)/, mark, 20_000);
      // Reconnecting to a frozen server: no response headers within the bound.
      await k.waitForStderr(/kube: Services: watch failed: no response within 2000 ms/, mark, 20_000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await mk('thawed', ['10.244.2.1']);
    await k.waitForItem('svc/default/thawed', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.2.1:8080]', 30_000);
    await expectConverged(k);
    await k.stop();
  }, 120_000);

  gated(need.root(), need.netns()).test('the API server unreachable (packets dropped): kpng retries as soon as it can be reached, not when its backoff ends', async () => {
    // kpng reaches the API server through a TCP relay on its own port, so that nftables can drop kpng's
    // packets (both ways, as a partition does) while this test keeps talking to the server directly.
    const api = new URL(cp.server);
    const relay = net.createServer((c) => {
      const u = net.connect(Number(api.port), api.hostname);
      c.pipe(u).pipe(c);
      c.on('error', () => u.destroy());
      u.on('error', () => c.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as AddressInfo).port;
    const kubeconfig = path.join(cp.dir, 'relay.kubeconfig');
    fs.writeFileSync(kubeconfig, fs.readFileSync(cp.kubeconfigPath, 'utf8').replace(cp.server, `https://127.0.0.1:${port}`));
    const table = `kpng-partition-${process.pid}`;
    const nft = (args: string[], input?: string) => execFileSync('nft', args, { input, stdio: ['pipe', 'ignore', 'pipe'] });
    await mk('before', ['10.244.3.1']);
    const k = new KpngTrace({ kubeconfig, node: 'n1', args: ['--min-sync-period', '0', '--log-level', 'debug'], env: { KPNG_KUBE_IDLE_TIMEOUT_MS: '2000', KPNG_KUBE_CONNECT_TIMEOUT_MS: '2000' } });
    children.push(k);
    try {
      await k.waitForItem('svc/default/before', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.3.1:8080]');
      const mark = k.stderr.length;
      nft(['-f', '-'], `table inet ${table} {\n  chain out { type filter hook output priority -10; tcp dport ${port} drop; tcp sport ${port} drop; }\n}\n`);
      try {
        // Silent watches torn down, then connections that cannot be made: the backoff grows meanwhile.
        await k.waitForStderr(/kube: EndpointSlices: watch failed: watch silent for 2 s \(watchdog\)/, mark, 20_000);
        await k.waitFor('connection attempts to time out', () => k.stderr.slice(mark).filter((l) => /cannot connect to 127\.0\.0\.1:\d+ within 2 s/.test(l)).length >= 3, 60_000);
        await mk('during', ['10.244.3.2']);
      } finally {
        nft(['delete', 'table', 'inet', table]);
      }
      const healed = k.stderr.length;
      await k.waitForItem('svc/default/during', 'ClusterIP 80/TCP cluster-ip=cluster[10.244.3.2:8080]', 60_000);
      // A reflector sleeping off its backoff was woken by the reachability probe, not by its timer.
      expect(k.stderr.slice(healed).some((l) => /kube: (Services|EndpointSlices|Node n1): the API server can be reached again; retrying after \d+ ms of \d+/.test(l))).toBe(true);
      await expectConverged(k);
    } finally {
      await k.stop();
      await new Promise((r) => relay.close(r));
    }
  }, 180_000);
});

/** The kube-apiserver process this control plane started (by its unique --secure-port). */
function apiServerPid(cp: ControlPlane): number {
  const port = new URL(cp.server).port;
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  const line = out.split('\n').find((l) => l.includes('kube-apiserver') && l.includes(`--secure-port=${port}`));
  if (!line) throw new Error(`no kube-apiserver process with --secure-port=${port}`);
  return Number(line.trim().split(/\s+/)[0]);
}

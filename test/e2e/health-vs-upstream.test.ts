// /healthz and /livez of kpng and of upstream kube-proxy (the v1.37.1 binary, nftables mode) side by
// side: each in its own network namespace (klif-*), both against the same real kube-apiserver, both
// for the same Node, asked the same questions under the same conditions. Status codes and the JSON
// bodies' fields (lastUpdated, currentTime, nodeEligible, healthy, status) must agree:
//
//   the Node does not exist yet      upstream's node manager has no Node: not eligible
//   the Node appears, both synced    healthy, eligible
//   tainted ToBeDeletedByClusterAutoscaler, then untainted
//   API server stopped after a good start (nothing queued: still healthy)
//   the Node being deleted (deletionTimestamp, held by a finalizer): /healthz 503, /livez 200
//   the Node deleted: both exit with code 1
//   before the first sync (Services and EndpointSlices forbidden by RBAC, the Node readable)
//
// A stalled sync cannot be made the same for both without replacing a part of upstream (its syncs
// go through the nft binary; kpng's through netlink): test/ops/proxy-health.test.ts and
// test/ops/ops-servers.test.ts hold kpng to upstream's rule for it (unhealthy once a queued update
// is older than twice the sync period), with an injected clock and with a stalled backend.
import { execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { Lab } from '../../bench/vs-upstream/lab';
import { buildKubeProxy, upstream } from '../../bench/vs-upstream/proxies';
import { POD_CIDR } from '../../bench/vs-upstream/cluster';
import { kpngMain, nodeBinary } from '../shared/kpng-process';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';

// Lab names its namespaces <prefix>-<id>-<tag>: this file's are klif-*.
process.env.KPNG_BENCH_NETNS_PREFIX = 'klif';
/** Inside each proxy's own namespace: no other test can hold them there. */
const HEALTHZ = '127.0.0.1:41256';
const METRICS = '127.0.0.1:41249';
const FINALIZER = 'klif.test/hold';

interface Answer { code: number; body: Record<string, any> }
/** What must agree between the two: the code, the body's fields, and what lastUpdated says. */
interface Shape { code: number; fields: string[]; nodeEligible?: boolean; healthy: boolean; status?: Record<string, boolean>; lastUpdated: 'zero' | 'now' | 'earlier' | 'set' }

/** A Go or JS RFC 3339 time as ms (Go writes up to nine fractional digits). */
const ms = (t: string) => Date.parse(t.replace(/(\.\d{3})\d+/, '$1'));

function shape(a: Answer): Shape {
  const b = a.body;
  const lu = String(b.lastUpdated);
  return {
    code: a.code,
    fields: Object.keys(b),
    ...('nodeEligible' in b ? { nodeEligible: b.nodeEligible } : {}),
    healthy: b.healthy,
    ...(b.status ? { status: Object.fromEntries(Object.entries(b.status as Record<string, { healthy: boolean }>).map(([f, s]) => [f, s.healthy])) } : {}),
    // A healthy answer says "now" (both set it so); an unhealthy one the last sync, whenever that was.
    lastUpdated: lu.startsWith('0001-01-01') ? 'zero' : a.code !== 200 ? 'set' : Math.abs(ms(lu) - ms(b.currentTime)) < 1000 ? 'now' : 'earlier',
  };
}

class Proxy {
  readonly lines: string[] = [];
  proc!: ChildProcess;
  constructor(readonly name: string, readonly lab: Lab) {}

  start(argv: string[]): void {
    this.proc = this.lab.startProxy(argv);
    for (const s of [this.proc.stdout!, this.proc.stderr!]) s.on('data', (d: Buffer) => this.lines.push(...d.toString().split('\n')));
  }

  /** GET from inside the namespace; undefined while nothing listens. */
  get(p: '/healthz' | '/livez'): Answer | undefined {
    const script = `fetch('http://${HEALTHZ}${p}').then(async (r) => console.log(JSON.stringify({ code: r.status, body: JSON.parse(await r.text()) })), () => console.log('null'))`;
    return JSON.parse(execFileSync('ip', ['netns', 'exec', this.lab.netns, nodeBinary(), '-e', script], { encoding: 'utf8' })) ?? undefined;
  }
}

async function until<T>(what: string, f: () => T | undefined, timeoutMs = 90_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('/healthz and /livez: kpng answers as upstream kube-proxy does', () => {
  let cp: ControlPlane;
  let bin: string;
  let dir: string;
  const labs: Lab[] = [];
  const table: string[] = [];

  const must = async (method: string, p: string, body?: unknown, contentType?: string) => {
    const r = await cp.request(method, p, body, contentType ? { contentType } : {});
    if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${p}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    return r.body;
  };

  /** Both proxies for `nodeName`, each in its namespace, with this kubeconfig. */
  const startPair = async (tag: string, kubeconfig: string, nodeName: string): Promise<[Proxy, Proxy]> => {
    const port = Number(new URL(cp.server).port);
    const up = new Proxy('upstream', await Lab.create(`${tag}-up-${process.pid % 10000}`, port));
    const kp = new Proxy('kpng', await Lab.create(`${tag}-kp-${process.pid % 10000}`, port));
    labs.push(up.lab, kp.lab);
    up.start([...upstream(bin).argv(kubeconfig, nodeName, POD_CIDR), `--healthz-bind-address=${HEALTHZ}`, `--metrics-bind-address=${METRICS}`]);
    kp.start([nodeBinary(), kpngMain(), 'kube', '--kubeconfig', kubeconfig, '--node', nodeName, '--to', 'nft', '--cluster-cidr', POD_CIDR,
      '--healthz-bind-address', HEALTHZ, '--metrics-bind-address', METRICS]);
    return [up, kp];
  };

  /** Waits until both answer as `want` says on both paths, then checks they agree; one row of the table. */
  const compare = async (condition: string, pair: [Proxy, Proxy], want: (hz: Shape, lz: Shape) => boolean) => {
    const seen = new Map<string, [Shape, Shape]>();
    for (const p of pair) {
      try {
        seen.set(p.name, await until(`${p.name}: ${condition}`, () => {
          const hz = p.get('/healthz');
          const lz = p.get('/livez');
          if (!hz || !lz) return undefined;
          const s: [Shape, Shape] = [shape(hz), shape(lz)];
          return want(...s) ? s : undefined;
        }));
      } catch (e) {
        throw new Error(`${(e as Error).message}; last answers ${JSON.stringify([p.get('/healthz'), p.get('/livez')])}\n${p.name} output:\n${p.lines.slice(-30).join('\n')}`);
      }
    }
    const [up, kp] = [seen.get('upstream')!, seen.get('kpng')!];
    const cell = (s: [Shape, Shape]) => `/healthz ${s[0].code} ${JSON.stringify({ nodeEligible: s[0].nodeEligible, healthy: s[0].healthy, lastUpdated: s[0].lastUpdated, status: s[0].status })}, /livez ${s[1].code}`;
    table.push(`${condition}\n    upstream: ${cell(up)}\n    kpng:     ${cell(kp)}`);
    expect(kp).toEqual(up);
  };

  beforeAll(async () => {
    bin = buildKubeProxy(); // cached after the first build
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'klif-health-'));
    cp = await startControlPlane({ log: () => {} });
    await must('POST', SERVICES('default'), newService('web'));
    await must('POST', SLICES('default'), newEndpointSlice('web-1', 'web', [{ ip: '10.244.0.7', nodeName: 'n1' }]));
  }, 600_000);

  afterAll(async () => {
    for (const l of labs) await l.stop().catch(() => undefined);
    await cp?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    if (table.length) console.log(`health answers, upstream vs kpng:\n${table.join('\n')}`);
  }, 120_000);

  test('the Node absent, then present, tainted, the API server gone, the Node being deleted', async () => {
    // n1 does not exist: upstream's node manager waits 30 s for it, then serves without a Node.
    const pair = await startPair('hz', cp.kubeconfigPath, 'n1');
    await compare('the Node does not exist', pair, (hz, lz) => hz.code === 503 && lz.code === 200);

    // The Node appears without addresses (upstream exits when the node IPs it started with change).
    await must('POST', NODES, { ...newNode('n1', 'zone-a'), metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'zone-a' }, finalizers: [FINALIZER] } });
    await compare('the Node exists, both synced', pair, (hz, lz) => hz.code === 200 && lz.code === 200 && hz.status !== undefined);

    await must('PATCH', `${NODES}/n1`, { spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' }] } });
    await compare('the Node tainted ToBeDeletedByClusterAutoscaler', pair, (hz) => hz.code === 503);
    await must('PATCH', `${NODES}/n1`, { spec: { taints: null } });
    await compare('the taint removed', pair, (hz) => hz.code === 200);

    await cp.stopApiServer();
    try {
      // Nothing is queued while the API server is away: both stay healthy.
      await new Promise((r) => setTimeout(r, 3000));
      await compare('the API server stopped after a good start', pair, (hz, lz) => hz.code === 200 && lz.code === 200);
    } finally {
      await cp.startApiServer();
    }

    await must('DELETE', `${NODES}/n1`);
    await compare('the Node being deleted (deletionTimestamp)', pair, (hz, lz) => hz.code === 503 && lz.code === 200);
    await must('PATCH', `${NODES}/n1`, { metadata: { finalizers: null } });
    // The Node is gone: upstream exits with code 1 (its pod starts again); so does kpng.
    const codes = await Promise.all(pair.map((p) => until(`${p.name} to exit`, () => p.proc.exitCode ?? undefined, 60_000)));
    table.push(`the Node deleted: upstream exits ${codes[0]}, kpng exits ${codes[1]}`);
    expect(codes).toEqual([1, 1]);
  }, 400_000);

  test('before the first sync: Services and EndpointSlices forbidden, the Node readable', async () => {
    await must('POST', NODES, newNode('n2', 'zone-a'));
    await must('PATCH', `${NODES}/n2/status`, nodeStatus(['192.168.1.2'], new Date()));
    // A service account that may read Nodes and nothing else.
    await must('POST', '/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'klif-nodes-only' } });
    await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name: 'klif-nodes-only' }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }] });
    await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'klif-nodes-only' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'klif-nodes-only' },
      subjects: [{ kind: 'ServiceAccount', name: 'klif-nodes-only', namespace: 'default' }],
    });
    const tr = await must('POST', '/api/v1/namespaces/default/serviceaccounts/klif-nodes-only/token', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } });
    const kc = JSON.parse(fs.readFileSync(cp.kubeconfigPath, 'utf8'));
    kc.users[0].user.token = tr.status.token;
    const file = path.join(dir, 'nodes-only');
    fs.writeFileSync(file, JSON.stringify(kc));
    const pair = await startPair('hf', file, 'n2');
    await compare('before the first sync (Services and EndpointSlices forbidden)', pair, (hz, lz) => hz.code === 200 && lz.code === 200);
    // kpng never synced (its info line for each sync is absent): the families are listed as of the
    // start, as upstream's SyncLoop marks them updated.
    expect(pair[1].lines.some((l) => /nft: revision \d+: /.test(l))).toBe(false);
  }, 300_000);
});

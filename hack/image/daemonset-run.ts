// The cluster side of hack/image/test.sh's DaemonSet check: a real kube-apiserver (hack/controlplane)
// holding a manifest's RBAC and ConfigMap, and what a pod of its DaemonSet gets from the kubelet: the
// ConfigMap volume, a service-account token of kube-system/kpng (TokenRequest, so RBAC is the
// manifest's own), the in-cluster env and the container's args. test.sh runs the image's entrypoint
// with them in the same network namespace (hostNetwork), then this checks what kpng did there:
// /healthz, /metrics, the nft table for a service, and one created after start (the watch works).
//
//   node dist/hack/image/daemonset-run.js --manifest RENDERED.yaml --pod-dir DIR [--node n1]   (kubectl kustomize deploy/overlays/nft)
// Writes DIR/config/<keys>, DIR/serviceaccount/{token,ca.crt,namespace}, DIR/pod.env (K=V lines),
// DIR/args (one per line), prints "ready", checks, prints "ok: ..." lines; exit 0 only if all passed.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { startControlPlane, type ControlPlane } from '../../test/e2e/support/controlplane';

type Obj = Record<string, any>;

function flag(name: string, def?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : def;
  if (v === undefined) throw new Error(`--${name} is required`);
  return v;
}

const PLURAL: Record<string, string> = { ServiceAccount: 'serviceaccounts', ConfigMap: 'configmaps', ClusterRole: 'clusterroles', ClusterRoleBinding: 'clusterrolebindings' };
function collection(o: Obj): string {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  return `${base}${o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : ''}/${PLURAL[o.kind]}`;
}

async function create(cp: ControlPlane, apiPath: string, o: Obj): Promise<Obj> {
  const r = await cp.request('POST', apiPath, o);
  if (r.status >= 300) throw new Error(`POST ${apiPath}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

function service(name: string, ip: string, endpoint: string): Obj[] {
  return [
    { apiVersion: 'v1', kind: 'Service', metadata: { namespace: 'default', name },
      spec: { type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] } },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { namespace: 'default', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4', ports: [{ name: 'http', protocol: 'TCP', port: 8080 }], endpoints: [{ addresses: [endpoint], conditions: { ready: true } }] },
  ];
}
const createService = async (cp: ControlPlane, objs: Obj[]): Promise<void> => {
  await create(cp, '/api/v1/namespaces/default/services', objs[0]);
  await create(cp, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', objs[1]);
};

function get(url: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 2000 }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', () => resolve({ status: 0, text: '' }));
    req.on('timeout', () => { req.destroy(); });
  });
}

async function until(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 90_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function nftTable(): string {
  try { return execFileSync('nft', ['list', 'table', 'ip', 'kpng'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }); } catch { return ''; }
}

async function main(): Promise<number> {
  const manifest = flag('manifest');
  const podDir = flag('pod-dir');
  const nodeName = flag('node', 'n1');
  const docs = parseAllDocuments(fs.readFileSync(manifest, 'utf8')).map((d) => d.toJS() as Obj).filter(Boolean);
  const ds = docs.find((d) => d.kind === 'DaemonSet');
  if (!ds) throw new Error(`${manifest} has no DaemonSet`);
  const pod = ds.spec.template.spec;
  const ctr = pod.containers[0];
  if (ctr.command) throw new Error('the container sets a command: this check runs the image entrypoint with args only');
  if (!pod.hostNetwork) throw new Error('the DaemonSet is not hostNetwork: the check shares one network namespace with the API server');

  const cp = await startControlPlane({ log: () => {} });
  try {
    for (const o of docs.filter((d) => PLURAL[d.kind])) await create(cp, collection(o), o);
    const saName: string = pod.serviceAccountName;
    const ns: string = ds.metadata.namespace;
    // The kubelet's projected token: a TokenRequest for the pod's service account.
    const tr = await create(cp, `/api/v1/namespaces/${ns}/serviceaccounts/${saName}/token`, { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } });
    const saDir = path.join(podDir, 'serviceaccount');
    fs.mkdirSync(saDir, { recursive: true });
    fs.writeFileSync(path.join(saDir, 'token'), tr.status.token);
    fs.writeFileSync(path.join(saDir, 'ca.crt'), cp.caPem);
    fs.writeFileSync(path.join(saDir, 'namespace'), ns);
    // The ConfigMap volume(s): keys become files.
    for (const v of pod.volumes.filter((x: Obj) => x.configMap)) {
      const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === v.configMap.name);
      const mount = ctr.volumeMounts.find((m: Obj) => m.name === v.name);
      if (!cm || !mount) continue;
      const dir = path.join(podDir, 'config');
      fs.mkdirSync(dir, { recursive: true });
      // The operator's one edit (docs/deploy.md): the API server's own address in kubeconfig.conf.
      for (const [k, val] of Object.entries(cm.data as Record<string, string>)) fs.writeFileSync(path.join(dir, k), val.replace('https://API_SERVER:6443', cp.server));
      fs.writeFileSync(path.join(podDir, 'config.mount'), mount.mountPath);
    }
    // Env: the container's (fieldRef spec.nodeName resolved) and the in-cluster service env.
    const env: Record<string, string> = {};
    for (const e of ctr.env ?? []) env[e.name] = e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName' ? nodeName : String(e.value ?? '');
    const url = new URL(cp.server);
    env.KUBERNETES_SERVICE_HOST = url.hostname;
    env.KUBERNETES_SERVICE_PORT = url.port;
    fs.writeFileSync(path.join(podDir, 'pod.env'), Object.entries(env).map(([k, v]) => `${k}=${v}\n`).join(''));
    // $(VAR) in args expanded from the container's env, as the kubelet does.
    const args = (ctr.args as string[]).map((a) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, k: string) => env[k] ?? m));
    fs.writeFileSync(path.join(podDir, 'args'), args.map((a) => `${a}\n`).join(''));

    await create(cp, '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName } });
    await createService(cp, service('web', '10.96.0.10', '10.244.1.5'));
    process.stdout.write('ready\n');

    const port = ctr.readinessProbe.httpGet.port as number;
    let hz = { status: 0, text: '' };
    await until(`readiness ${ctr.readinessProbe.httpGet.path} on ${port}`, async () => (hz = await get(`http://127.0.0.1:${port}${ctr.readinessProbe.httpGet.path}`)).status === 200);
    console.log(`ok: readiness probe ${ctr.readinessProbe.httpGet.path} 200 ${hz.text.trim()}`);
    const lz = await get(`http://127.0.0.1:${ctr.livenessProbe.httpGet.port}${ctr.livenessProbe.httpGet.path}`);
    if (lz.status !== 200) throw new Error(`liveness probe ${ctr.livenessProbe.httpGet.path}: ${lz.status}`);
    console.log(`ok: liveness probe ${ctr.livenessProbe.httpGet.path} 200`);
    await until('nft rules for default/web (10.96.0.10 -> 10.244.1.5)', () => { const t = nftTable(); return t.includes('10.96.0.10') && t.includes('10.244.1.5'); });
    console.log('ok: nft table ip kpng has default/web from the API server');
    await createService(cp, service('db', '10.96.0.11', '10.244.2.6'));
    await until('nft rules for default/db created after start', () => { const t = nftTable(); return t.includes('10.96.0.11') && t.includes('10.244.2.6'); });
    console.log('ok: default/db, created after start, programmed (list + watch allowed by the manifest\'s RBAC)');
    const metricsPort = ctr.ports?.find((p: Obj) => p.name === 'metrics')?.containerPort as number | undefined;
    if (metricsPort) {
      const m = await get(`http://127.0.0.1:${metricsPort}/metrics`);
      if (m.status !== 200 || !/^kubeproxy_sync_proxy_rules_duration_seconds_count\S* [1-9]/m.test(m.text)) throw new Error(`metrics on ${metricsPort}: ${m.status}, no sync counted`);
      console.log(`ok: metrics on ${metricsPort} count syncs`);
    }
    return 0;
  } finally {
    await cp.stop();
  }
}

main().then((code) => { process.exitCode = code; }, (e) => { console.error(`FAIL: ${e instanceof Error ? e.message : String(e)}`); process.exitCode = 1; });

// Against a real kube-apiserver: each overlay of deploy/, as `kubectl kustomize` renders it, is accepted
// (server-side dry run, strict field validation); the API server's address is set the way docs/deploy.md
// says; and /healthz follows this Node's life as kube-proxy's does (the cluster autoscaler's deletion taint, a
// deletion in progress) while /livez stays healthy.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { KpngTrace } from '../shared/kpng-trace';
import { newNode, NODES, nodeStatus } from '../shared/objects';
import { ROOT } from '../helpers/cli';
import { kustomize, OVERLAYS, renderOverlay, type Obj } from '../helpers/deploy';

function collection(o: Obj): string {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const plural: Record<string, string> = { ServiceAccount: 'serviceaccounts', ConfigMap: 'configmaps', ClusterRole: 'clusterroles', ClusterRoleBinding: 'clusterrolebindings', DaemonSet: 'daemonsets', Job: 'jobs' };
  if (!plural[o.kind]) throw new Error(`no collection known for ${o.kind}`);
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  return `${base}${o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : ''}/${plural[o.kind]}`;
}

describe('deploy/ and node health against a real API server', () => {
  let cp: ControlPlane;
  beforeAll(async () => { cp = await startControlPlane({ log: () => {} }); }, 180_000);
  afterAll(async () => { await cp?.stop(); }, 60_000);

  test.each(OVERLAYS)('deploy/overlays/%s is accepted by kube-apiserver (dry run, strict)', async (overlay) => {
    const { objs } = renderOverlay(overlay);
    expect(objs.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'DaemonSet', 'ServiceAccount']);
    expect(objs.length).toBeGreaterThan(0);
    for (const o of objs) {
      const r = await cp.request('POST', `${collection(o)}?dryRun=All&fieldValidation=Strict`, o);
      expect({ kind: o.kind, status: r.status, message: r.body?.message }).toEqual({ kind: o.kind, status: 201, message: undefined });
      expect(r.headers.warning).toBeUndefined();
    }
    const ds = objs.find((o) => o.kind === 'DaemonSet')!;
    // The check can fail: a misspelt field is refused.
    const typo = structuredClone(ds);
    typo.spec.template.spec.containers[0].livenesProbe = typo.spec.template.spec.containers[0].livenessProbe;
    expect((await cp.request('POST', `${collection(typo)}?dryRun=All&fieldValidation=Strict`, typo)).status).toBe(400);
    const c = ds.spec.template.spec.containers[0];
    expect(c.livenessProbe.httpGet).toEqual({ path: '/livez', port: 10256 });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/healthz', port: 10256 });
    // Ready within a second of serving (make chaos proxy-kill: 9 s after a kill with a 5 s period).
    expect(c.readinessProbe.periodSeconds).toBeLessThanOrEqual(1);
    expect(ds.spec.template.spec.hostNetwork).toBe(true);
    // The node's resolver: the cluster DNS is a ClusterIP kpng itself programs (a DNS-named API server would never resolve).
    expect(ds.spec.template.spec.dnsPolicy ?? 'Default').not.toBe('ClusterFirstWithHostNet');
    // The privileges themselves: deploy-privileges.test.ts (nft, ebpf) and its .guest twin (ipvs).
    expect(c.securityContext.privileged ?? c.securityContext.capabilities.add.includes('NET_ADMIN')).toBe(true);
  });

  test('deploy/migration: kpng only on labelled nodes, kube-proxy\'s patch and the clean-up Job accepted (dry run, strict)', async () => {
    const dir = path.join(ROOT, 'deploy', 'migration');
    const objs = kustomize(dir);
    const ds = objs.find((o) => o.kind === 'DaemonSet')!;
    expect(ds.spec.template.spec.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux', 'kpng.io/service-proxy': 'kpng' });
    const job = parseYaml(fs.readFileSync(path.join(dir, 'cleanup-kpng-job.yaml'), 'utf8').replace(/NODE_NAME/g, 'n1')) as Obj;
    expect(job.spec.template.spec.containers[0].args).toEqual(['--cleanup', '--cleanup-only=kpng']);
    const check = parseYaml(fs.readFileSync(path.join(dir, 'migrate-check-job.yaml'), 'utf8').replace(/NODE_NAME/g, 'n1')) as Obj;
    expect(check.spec.template.spec.containers[0].args).toEqual(['migrate-check', '--config=/var/lib/kube-proxy/config.conf', '--hostname-override=n1']);
    // kube-proxy's DaemonSet as kubeadm makes it, with the patch merged as `kubectl patch` merges it.
    const patch = parseYaml(fs.readFileSync(path.join(dir, 'kube-proxy-patch.yaml'), 'utf8')) as Obj;
    const kubeProxy = parseYaml(fs.readFileSync(path.join(ROOT, 'hack', 'cluster', 'manifests', 'kube-proxy.yaml'), 'utf8').split(/^---$/m).find((d) => /kind: DaemonSet/.test(d))!.replace(/K8S_VERSION/g, 'v1.37.1')) as Obj;
    kubeProxy.spec.template.spec.affinity = patch.spec.template.spec.affinity;
    for (const o of [...objs, job, check, kubeProxy]) {
      const r = await cp.request('POST', `${collection(o)}?dryRun=All&fieldValidation=Strict`, o);
      expect({ kind: o.kind, status: r.status, message: r.body?.message }).toEqual({ kind: o.kind, status: 201, message: undefined });
    }
  });

  test('the ConfigMap is kube-proxy\'s as kubeadm writes it; the IPVS overlay changes only the mode and its section', () => {
    const cm = (o: string) => renderOverlay(o as typeof OVERLAYS[number]).configMap;
    const base = cm('nft');
    expect(base.metadata).toEqual({ name: 'kpng', namespace: 'kube-system' });
    const kubeconfig = parseYaml(base.data['kubeconfig.conf']);
    expect(kubeconfig.clusters).toEqual([{ name: 'default', cluster: { 'certificate-authority': '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt', server: 'https://API_SERVER:6443' } }]);
    expect(kubeconfig.users).toEqual([{ name: 'default', user: { tokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token' } }]);
    const conf = (c: Obj) => parseYaml(c.data['config.conf']);
    expect(conf(base).clientConnection.kubeconfig).toBe('/var/lib/kube-proxy/kubeconfig.conf');
    expect(cm('ebpf').data).toEqual(base.data);
    const ipvs = cm('ipvs');
    expect(ipvs.data['kubeconfig.conf']).toBe(base.data['kubeconfig.conf']);
    const { mode: m1, nftables, ...rest1 } = conf(base);
    const { mode: m2, ipvs: section, ...rest2 } = conf(ipvs);
    expect([m1, m2]).toEqual(['nftables', 'ipvs']);
    expect(rest2).toEqual(rest1);
    expect({ syncPeriod: section.syncPeriod, minSyncPeriod: section.minSyncPeriod }).toEqual(nftables);
  });

  test.each(OVERLAYS)('the API server\'s address, set as docs/deploy.md says: a kustomization over deploy/overlays/%s with kubeconfig.conf', (overlay) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dpl-kustomize-'));
    try {
      // kubeadm's cluster: kube-proxy's own kubeconfig.conf (kubectl -n kube-system get cm kube-proxy).
      const mine = fs.readFileSync(path.join(ROOT, 'deploy/base/kubeconfig.conf'), 'utf8').replace('https://API_SERVER:6443', 'https://10.0.0.5:6443');
      fs.writeFileSync(path.join(dir, 'kubeconfig.conf'), mine);
      fs.writeFileSync(path.join(dir, 'kustomization.yaml'), [
        `resources: [${path.relative(dir, path.join(ROOT, 'deploy/overlays', overlay))}]`,
        'configMapGenerator: [{name: kpng, namespace: kube-system, behavior: merge, files: [kubeconfig.conf]}]', ''].join('\n'));
      const objs = kustomize(dir);
      const cm = objs.find((o) => o.kind === 'ConfigMap')!;
      expect(parseYaml(cm.data['kubeconfig.conf']).clusters[0].cluster.server).toBe('https://10.0.0.5:6443');
      expect(cm.data['config.conf']).toBe(renderOverlay(overlay).configMap.data['config.conf']);
      expect(objs.filter((o) => o.kind === 'ConfigMap').length).toBe(1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('/healthz is 503 while the Node is tainted for deletion or being deleted; /livez stays 200; kpng exits once it is gone', async () => {
    await cp.request('POST', NODES, newNode('n1', 'zone-a'));
    await cp.request('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date()));
    const kpng = new KpngTrace({ kubeconfig: cp.kubeconfigPath, node: 'n1', args: ['--min-sync-period', '0'] });
    try {
      await kpng.waitFor('first sync', () => kpng.syncs.length > 0, 30_000);
      await kpng.waitForStderr(/healthz: serving on/);
      const port = Number(/healthz: serving on http:\/\/127\.0\.0\.1:(\d+)/.exec(kpng.stderr.find((l) => /healthz: serving/.test(l))!)![1]);
      const get = async (p: string) => { const r = await fetch(`http://127.0.0.1:${port}${p}`); return { status: r.status, body: await r.json() as Obj }; };
      const until = async (what: string, status: number) => {
        const t0 = Date.now();
        let r = await get('/healthz');
        while (r.status !== status) {
          if (Date.now() - t0 > 20000) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(r)}\n${kpng.tail(20)}`);
          await new Promise((res) => setTimeout(res, 100));
          r = await get('/healthz');
        }
        return r;
      };
      expect((await until('eligible', 200)).body.nodeEligible).toBe(true);

      await cp.request('PATCH', `${NODES}/n1`, { spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' }] } });
      const tainted = await until('the taint', 503);
      expect(tainted.body).toMatchObject({ nodeEligible: false, healthy: true });
      expect((await get('/livez')).status).toBe(200);

      await cp.request('PATCH', `${NODES}/n1`, { spec: { taints: null } });
      await until('the taint removed', 200);

      // A finalizer keeps the Node while it is being deleted: deletionTimestamp is set.
      await cp.request('PATCH', `${NODES}/n1`, { metadata: { finalizers: ['kpng.test/hold'] } });
      const del = await cp.request('DELETE', `${NODES}/n1`);
      expect(del.status).toBe(200);
      expect((await until('the deletion', 503)).body.nodeEligible).toBe(false);
      expect((await get('/livez')).status).toBe(200);
      await cp.request('PATCH', `${NODES}/n1`, { metadata: { finalizers: null } });
      // Gone: kpng exits with code 1, as kube-proxy does (test/e2e/health-vs-upstream.test.ts compares them).
      expect(await kpng.exited).toBe(1);
      expect(kpng.stderr.some((l) => /Node n1 was deleted: exiting/.test(l))).toBe(true);
    } finally {
      await kpng.stop();
    }
  }, 90_000);
});

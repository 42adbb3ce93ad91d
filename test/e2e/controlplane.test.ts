// Proves the e2e control-plane helper: a real etcd + kube-apiserver, objects written through the HTTPS
// client, surviving an apiserver restart, and 410 Gone for resourceVersions that are no longer served.
import * as fs from 'node:fs';
import { startControlPlane, type ControlPlane, type ApiResponse } from './support/controlplane';

const NS = '/api/v1/namespaces/default';
const SLICES = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';

/** Every watch event in a watch response body (one JSON object per line). */
function events(r: ApiResponse): Array<{ type: string; object: any }> {
  return r.text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}

/** True if a watch answered 410 Gone, either as the HTTP status or as an in-stream ERROR event. */
function isGone(r: ApiResponse): boolean {
  if (r.status === 410) return true;
  return r.status === 200 && events(r).some((e) => e.type === 'ERROR' && e.object?.code === 410);
}

describe('control plane helper (etcd + kube-apiserver)', () => {
  let cp: ControlPlane;
  let rvBeforeRestart = '';

  beforeAll(async () => {
    cp = await startControlPlane();
  }, 120_000);

  afterAll(async () => {
    const dir = cp?.dir;
    await cp?.stop();
    if (dir) expect(fs.existsSync(dir)).toBe(false);
  }, 60_000);

  test('writes a kubeconfig with server, CA and token', () => {
    const kc = JSON.parse(fs.readFileSync(cp.kubeconfigPath, 'utf8'));
    expect(kc.clusters[0].cluster.server).toBe(cp.server);
    expect(Buffer.from(kc.clusters[0].cluster['certificate-authority-data'], 'base64').toString()).toBe(cp.caPem);
    expect(kc.users[0].user.token).toBe(cp.token);
    expect(cp.server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  test('creates a Service and an EndpointSlice and lists them back', async () => {
    const svc = await cp.request('POST', `${NS}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web' },
      spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
    });
    expect(svc.status).toBe(201);
    expect(svc.body.spec.clusterIP).toMatch(/^10\.96\./);

    const slice = await cp.request('POST', SLICES, {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [
        { addresses: ['10.244.0.5'], conditions: { ready: true, serving: true, terminating: false } },
        { addresses: ['10.244.0.6'], conditions: { ready: false, serving: true, terminating: true } },
      ],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
    expect(slice.status).toBe(201);

    const services = await cp.request('GET', `${NS}/services`);
    expect(services.status).toBe(200);
    // (`kubernetes` appears too, once the apiserver's bootstrap controller has created it.)
    expect(services.body.items.map((s: any) => s.metadata.name)).toContain('web');

    const slices = await cp.request('GET', `${SLICES}?labelSelector=${encodeURIComponent('kubernetes.io/service-name=web')}`);
    expect(slices.status).toBe(200);
    expect(slices.body.items).toHaveLength(1);
    expect(slices.body.items[0].endpoints.map((e: any) => e.addresses[0])).toEqual(['10.244.0.5', '10.244.0.6']);
    rvBeforeRestart = slices.body.metadata.resourceVersion;
  });

  test('objects survive a kube-apiserver restart', async () => {
    const before = await cp.request('GET', `${NS}/services/web`);
    await cp.stopApiServer();
    await expect(cp.request('GET', `${NS}/services/web`, undefined, { timeoutMs: 2000 })).rejects.toThrow();
    await cp.startApiServer();
    const after = await cp.request('GET', `${NS}/services/web`);
    expect(after.status).toBe(200);
    expect(after.body.metadata.uid).toBe(before.body.metadata.uid);
    const slice = await cp.request('GET', `${SLICES}/web-1`);
    expect(slice.status).toBe(200);
  }, 120_000);

  test('after a restart and an etcd compaction, a watch from an old resourceVersion answers 410 Gone', async () => {
    // Some writes after the old resourceVersion, so there is history to compact away.
    await patchSlice(cp, 3);
    const rev = await cp.compactEtcd();
    expect(rev).toBeGreaterThan(Number(rvBeforeRestart));

    // The watch cache was rebuilt at the restart: rvBeforeRestart is older than anything it holds (and
    // etcd has compacted it away too). 410 comes as the status or as an ERROR event.
    const watch = await watchFrom(cp, rvBeforeRestart);
    expect(isGone(watch)).toBe(true);

    // The current state is still there, and a watch from the current resourceVersion works.
    const now = await cp.request('GET', SLICES);
    expect(now.body.items[0].metadata.annotations.step).toBe('2');
    const ok = await watchFrom(cp, now.body.metadata.resourceVersion, 1);
    expect(ok.status).toBe(200);
    expect(isGone(ok)).toBe(false);
  }, 60_000);
});

describe('control plane helper without the watch cache', () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    cp = await startControlPlane({ watchCache: false });
  }, 120_000);

  afterAll(async () => {
    await cp?.stop();
  }, 60_000);

  test('etcd compaction alone makes an old resourceVersion answer 410 Gone', async () => {
    const created = await cp.request('POST', SLICES, {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.0.5'] }],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
    expect(created.status).toBe(201);
    const oldRV = created.body.metadata.resourceVersion;
    await patchSlice(cp, 3);

    // Before compaction the old resourceVersion is still served: the watch replays the 3 changes.
    const before = await watchFrom(cp, oldRV, 1);
    expect(events(before).map((e) => e.type)).toEqual(['MODIFIED', 'MODIFIED', 'MODIFIED']);

    await cp.compactEtcd();
    const watch = await watchFrom(cp, oldRV);
    expect(isGone(watch)).toBe(true);
    const list = await cp.request('GET', `${SLICES}?resourceVersion=${oldRV}&resourceVersionMatch=Exact`);
    expect(list.status).toBe(410);
    expect(list.body.reason).toBe('Expired');
  }, 60_000);
});

async function patchSlice(cp: ControlPlane, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const r = await cp.request('PATCH', `${SLICES}/web-1`, { metadata: { annotations: { step: String(i) } } });
    expect(r.status).toBe(200);
  }
}

/** A watch on the EndpointSlices from rv; the server ends it after timeoutSeconds. */
function watchFrom(cp: ControlPlane, rv: string, timeoutSeconds = 5): Promise<ApiResponse> {
  return cp.request('GET', `${SLICES}?watch=1&resourceVersion=${rv}&timeoutSeconds=${timeoutSeconds}`, undefined, {
    timeoutMs: (timeoutSeconds + 10) * 1000,
  });
}

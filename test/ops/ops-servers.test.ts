// The real kpng command with its metrics and health servers on 127.0.0.1 (free ports): /metrics has
// kube-proxy's names and labels and its values move with syncs; /healthz and /livez turn 503 when the
// sink stalls with a change queued for longer than the health timeout, and 200 again when it recovers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import net from 'node:net';
import { KpngProcess, ROOT, runKpng } from '../helpers/cli';
import { waitFor } from '../helpers/wait';

const plugin = path.join(ROOT, 'dist', 'test', 'ops', 'fixtures', 'stall-backend.js');
const example = fs.readFileSync(path.join(ROOT, 'examples', 'cluster.yaml'), 'utf8');
let dir: string;
beforeAll(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kbo-ops-')); });
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

type Obj = Record<string, any>;
const objects = (): Obj[] => { const d = parseAllDocuments(example).map((x) => x.toJS()); return (d.length === 1 && Array.isArray(d[0]) ? d[0] : d.flatMap((x) => (x?.items ?? [x]))) as Obj[]; };

/** Writes the example with `extra` endpoints in web's slice, stamped with a trigger time (atomic rename). */
function writeState(file: string, extraIps: string[]): void {
  const objs = objects();
  const webSlice = objs.find((o) => o.kind === 'EndpointSlice' && o.metadata.labels?.['kubernetes.io/service-name'] === 'web')!;
  for (const ip of extraIps) webSlice.endpoints.push({ addresses: [ip], conditions: { ready: true }, nodeName: 'n1' });
  webSlice.metadata.annotations = { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString() };
  fs.writeFileSync(file + '.tmp', stringify({ apiVersion: 'v1', kind: 'List', items: objs }));
  fs.renameSync(file + '.tmp', file);
}

async function get(port: number, p: string): Promise<{ status: number; text: string; headers: Headers }> {
  const r = await fetch(`http://127.0.0.1:${port}${p}`);
  return { status: r.status, text: await r.text(), headers: r.headers };
}

/** One sample's value, e.g. value(text, 'kpng_state_revision') or with labels '{ip_family="IPv4"}'. */
function value(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(name + labels + ' '));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const UPSTREAM = [
  'kubeproxy_sync_proxy_rules_duration_seconds', 'kubeproxy_sync_full_proxy_rules_duration_seconds', 'kubeproxy_sync_partial_proxy_rules_duration_seconds',
  'kubeproxy_network_programming_duration_seconds', 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'kubeproxy_sync_proxy_rules_endpoint_changes_total', 'kubeproxy_sync_proxy_rules_service_changes_pending',
  'kubeproxy_sync_proxy_rules_service_changes_total', 'kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
  'kubeproxy_proxy_healthz_total', 'kubeproxy_proxy_livez_total',
];

test('metrics move with syncs; /healthz and /livez flip to 503 on a stalled sink and back', async () => {
  const file = path.join(dir, 'state.yaml');
  const stall = path.join(dir, 'stall');
  writeState(file, []);
  const p = new KpngProcess(['file', '--input', file, '--node', 'n1', '--plugin', plugin, '--to', 'stall', '--stall-file', stall,
    '--sync-period', '1s', '--min-sync-period', '0', '--metrics-bind-address', '127.0.0.1:0', '--healthz-bind-address', '127.0.0.1:0']);
  try {
    await waitFor('both servers', () => /metrics: serving on .*:\d+/.test(p.text('stderr')) && /healthz: serving on .*:\d+/.test(p.text('stderr')));
    const mport = Number(/metrics: serving on http:\/\/127\.0\.0\.1:(\d+)/.exec(p.text('stderr'))![1]);
    const hport = Number(/healthz: serving on http:\/\/127\.0\.0\.1:(\d+)/.exec(p.text('stderr'))![1]);
    await p.waitForLine(/^applied 1$/, { stream: 'stdout' });

    const m1 = (await get(mport, '/metrics'));
    expect(m1.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const name of UPSTREAM) expect(m1.text).toContain(`# TYPE ${name} `);
    expect(m1.text).toContain('# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram');
    expect(value(m1.text, 'kubeproxy_sync_proxy_rules_duration_seconds_count', '{ip_family="IPv4"}')).toBe(1);
    expect(value(m1.text, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count', '{ip_family="IPv4"}')).toBe(1);
    expect(value(m1.text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', '{ip_family="IPv4"}')).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(value(m1.text, 'kubeproxy_sync_proxy_rules_service_changes_total')).toBeGreaterThan(0);
    expect(value(m1.text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending')).toBe(0);
    expect(value(m1.text, 'kpng_state_revision')).toBe(1);
    expect(value(m1.text, 'kpng_syncs_total', '{backend="stall",result="ok",kind="full"}')).toBe(1);
    expect(m1.text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(m1.text).toMatch(/^kpng_build_info\{version="[^"]+",backend="stall",node="v\d+/m);
    expect((await get(mport, '/proxyMode')).text).toBe('stall');
    expect(m1.text).toMatch(/^kubernetes_build_info\{major="\d+",minor="\d+",git_version="v[^"]+",.*go_version="v\d+[^"]*",compiler="v8",platform="linux\/[^"]+"\} 1$/m);
    const cz = await get(mport, '/configz');
    expect(cz.headers.get('content-type')).toBe('application/json');
    expect(JSON.parse(cz.text)).toMatchObject({ 'kubeproxy.config.k8s.io': { kind: 'KubeProxyConfiguration', hostnameOverride: 'n1', mode: 'stall', metricsBindAddress: '127.0.0.1:0' } });
    const endpointsBefore = value(m1.text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total')!;

    // A real change: partial sync, counters and the programming latency move.
    writeState(file, ['10.244.1.99']);
    await p.waitForLine(/^applied 2$/, { stream: 'stdout' });
    const m2 = (await get(mport, '/metrics')).text;
    expect(value(m2, 'kubeproxy_sync_proxy_rules_duration_seconds_count', '{ip_family="IPv4"}')).toBe(2);
    expect(value(m2, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count', '{ip_family="IPv4"}')).toBe(1);
    expect(value(m2, 'kubeproxy_network_programming_duration_seconds_count', '{ip_family="IPv4"}')).toBe(1);
    expect(value(m2, 'kubeproxy_sync_proxy_rules_endpoint_changes_total')).toBeGreaterThan(endpointsBefore);
    expect(value(m2, 'kpng_state_revision')).toBe(2);
    expect(value(m2, 'kpng_sync_batch_changes_count', '{backend="stall"}')).toBe(2);

    const ok = await get(hport, '/healthz');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toBe('application/json');
    expect(JSON.parse(ok.text)).toEqual({ lastUpdated: expect.any(String), currentTime: expect.any(String), nodeEligible: true, healthy: true,
      status: { IPv4: { lastUpdated: expect.any(String), healthy: true }, IPv6: { lastUpdated: expect.any(String), healthy: true } } });

    // Stall the sink with a change queued: unhealthy after 2 x --sync-period (2 s).
    fs.writeFileSync(stall, '');
    writeState(file, ['10.244.1.98']);
    const t0 = Date.now();
    let hz = ok;
    while ((hz = await get(hport, '/healthz')).status === 200) {
      if (Date.now() - t0 > 15000) throw new Error('healthz never turned 503');
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(hz.status).toBe(503);
    expect(JSON.parse(hz.text)).toMatchObject({ healthy: false, nodeEligible: true, status: { IPv4: { healthy: false } } });
    const lz = await get(hport, '/livez');
    expect(lz.status).toBe(503);
    expect(JSON.parse(lz.text).nodeEligible).toBeUndefined();
    const m3 = (await get(mport, '/metrics')).text;
    expect(value(m3, 'kubeproxy_proxy_healthz_total', '{code="503"}')).toBeGreaterThanOrEqual(1);
    expect(value(m3, 'kubeproxy_proxy_livez_total', '{code="503"}')).toBe(1);
    expect(value(m3, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending')).toBeGreaterThanOrEqual(1);
    expect(value(m3, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', '{ip_family="IPv4"}')).toBeGreaterThan(value(m3, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', '{ip_family="IPv4"}')!);

    // Recovery.
    fs.rmSync(stall);
    await p.waitForLine(/^applied 3$/, { stream: 'stdout' });
    expect((await get(hport, '/healthz')).status).toBe(200);
    expect((await get(hport, '/livez')).status).toBe(200);
    expect(value((await get(mport, '/metrics')).text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending')).toBe(0);
    expect((await get(hport, '/nope')).status).toBe(404);
  } finally {
    fs.rmSync(stall, { force: true });
    await p.stop();
  }
});

test('--once starts no server; an unusable bind address is a usage error', async () => {
  const file = path.join(dir, 'once.yaml');
  writeState(file, []);
  const r = runKpng(['file', '--input', file, '--node', 'n1', '--once', '--to', 'routes']);
  expect(r.code).toBe(0);
  expect(r.stderr).not.toMatch(/serving on/);
  const bad = runKpng(['file', '--input', file, '--healthz-bind-address', 'everywhere']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--healthz-bind-address: "everywhere" is not IP:PORT/);
});

test('--bind-address-hard-fail: a taken port stops kpng; without it kpng logs and keeps running', async () => {
  const taken = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => taken.once('listening', r));
  const port = (taken.address() as { port: number }).port;
  const file = path.join(dir, 'hard.yaml');
  writeState(file, []);
  try {
      const hard = runKpng(['file', '--input', file, '--node', 'n1', '--metrics-bind-address', `127.0.0.1:${port}`, '--healthz-bind-address', '127.0.0.1:0', '--bind-address-hard-fail']);
    expect(hard.code).toBe(1);
    expect(hard.stderr).toMatch(new RegExp(`metrics: cannot listen on 127.0.0.1:${port}: .*EADDRINUSE`));
    const soft = new KpngProcess(['file', '--input', file, '--node', 'n1', '--to', 'trace', '--metrics-bind-address', `127.0.0.1:${port}`, '--healthz-bind-address', '127.0.0.1:0']);
    try {
      await soft.waitForLine(/^sync /, { stream: 'stdout' });
      expect(soft.text('stderr')).toMatch(/metrics: cannot listen .*EADDRINUSE.*; retrying every 5s/);
    } finally {
      await soft.stop();
    }
  } finally {
    taken.close();
  }
});

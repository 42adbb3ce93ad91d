// OpsServers's metrics server through real HTTP on 127.0.0.1: /proxyMode in kube-proxy's words, /configz as
// component-base serves it (given or built from what OpsServers knows), kubernetes_build_info, and the
// conntrack reconciler metrics fed by a real KernelSink's clean-ups.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { OpsServers, type OpsContext } from '../../src/cli/ops';
import type { OpsOptions } from '../../src/cli/kube-proxy-flags';
import type { Dataplane, SyncReport } from '../../src/backend/kernel/dataplane';
import { KernelSink } from '../../src/backend/kernel/kernel-sink';
import { buildInfo, rawVersion, readBuildStamp, UNSTAMPED } from '../../src/metrics/build-info';
import { createLogger } from '../../src/util/log';
import { cluster, ep, node, slice, svc } from '../helpers/k8s';
import { parseKlogLine } from '../helpers/klog';

const OPTS: OpsOptions = { metricsBindAddress: '127.0.0.1:0', healthzBindAddress: null, bindAddressHardFail: true, conntrack: null, oomScoreAdj: undefined };

/** Starts OpsServers with its metrics server on a free port; `stop` must be called. */
async function startOps(ctx: Partial<OpsContext> & Pick<OpsContext, 'backend'>): Promise<{ ops: OpsServers; port: number; stop: () => Promise<void> }> {
  const lines: string[] = [];
  const log = createLogger({ write: (l) => lines.push(l) });
  const ops = new OpsServers(OPTS, { node: 'n1', syncPeriodMs: 30_000, once: false, log, version: '0.1.0', ...ctx });
  await ops.start();
  const served = lines.map((l) => parseKlogLine(l)?.message ?? '').map((m) => /^metrics: serving on http:\/\/127\.0\.0\.1:(\d+)$/.exec(m)).find(Boolean);
  if (!served) throw new Error(`no "serving on" line in:\n${lines.join('\n')}`);
  return { ops, port: Number(served[1]), stop: () => ops.stop() };
}

async function get(port: number, path: string): Promise<{ status: number; text: string; headers: Headers }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, text: await r.text(), headers: r.headers };
}

test.each([
  ['nft', 'nftables'],
  ['ebpf', 'nftables'],
  ['ipvs', 'ipvs'],
  ['routes', 'routes'],
])('/proxyMode for --to %s answers %s', async (backend, mode) => {
  const s = await startOps({ backend: { name: backend } });
  try {
    const r = await get(s.port, '/proxyMode');
    expect(r.status).toBe(200);
    expect(r.text).toBe(mode);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  } finally {
    await s.stop();
  }
});

test('/configz without a configuration: what OpsServers knows, under kubeproxy.config.k8s.io', async () => {
  const s = await startOps({ backend: { name: 'nft', kernel: true } });
  try {
    const r = await get(s.port, '/configz');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(JSON.parse(r.text)).toEqual({
      'kubeproxy.config.k8s.io': {
        kind: 'KubeProxyConfiguration', apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
        hostnameOverride: 'n1', mode: 'nftables', metricsBindAddress: '127.0.0.1:0', healthzBindAddress: '', bindAddressHardFail: true,
      },
    });
  } finally {
    await s.stop();
  }
});

test('/configz serves the given configuration as it is at each request; a failure is a 500', async () => {
  let cfg: unknown = { kind: 'KubeProxyConfiguration', apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', mode: 'nftables', clusterCIDR: '10.244.0.0/16' };
  const s = await startOps({ backend: { name: 'nft' }, configz: () => { if (cfg === undefined) throw new Error('not ready'); return cfg; } });
  try {
    expect(JSON.parse((await get(s.port, '/configz')).text)).toEqual({ 'kubeproxy.config.k8s.io': cfg });
    cfg = { ...(cfg as object), clusterCIDR: '10.245.0.0/16' };
    expect(JSON.parse((await get(s.port, '/configz')).text)['kubeproxy.config.k8s.io'].clusterCIDR).toBe('10.245.0.0/16');
    cfg = undefined;
    const bad = await get(s.port, '/configz');
    expect(bad.status).toBe(500);
    expect(bad.text).toMatch(/not ready/);
  } finally {
    await s.stop();
  }
});

test('buildInfo: kpng\'s version where Kubernetes has its own, Node.js where it has Go, Go\'s arch names', () => {
  expect(buildInfo('0.12.3', { version: 'v22.19.0', platform: 'linux', arch: 'x64' }, UNSTAMPED)).toEqual({
    major: '0', minor: '12', git_version: 'v0.12.3', git_commit: '', git_tree_state: '', build_date: '1970-01-01T00:00:00Z',
    go_version: 'v22.19.0', compiler: 'v8', platform: 'linux/amd64',
  });
  expect(buildInfo('1.0.0', { version: 'v22.19.0', platform: 'linux', arch: 'arm64' }).platform).toBe('linux/arm64');
});

test('the build stamp fills commit, tree state and date; without one they are component-base\'s unstamped values', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stamp-'));
  try {
    const file = path.join(dir, 'build-stamp.json');
    expect(readBuildStamp(file)).toEqual(UNSTAMPED);
    fs.writeFileSync(file, JSON.stringify({ gitCommit: 'abc123', gitTreeState: 'clean', buildDate: '2026-12-07T10:00:00Z' }));
    const info = buildInfo('0.1.0', { version: 'v24.21.0', platform: 'linux', arch: 'x64' }, readBuildStamp(file));
    expect([info.git_commit, info.git_tree_state, info.build_date]).toEqual(['abc123', 'clean', '2026-12-07T10:00:00Z']);
    expect(rawVersion(info)).toBe('version.Info{Major:"0", Minor:"1", GitVersion:"v0.1.0", GitCommit:"abc123", GitTreeState:"clean", BuildDate:"2026-12-07T10:00:00Z", GoVersion:"v24.21.0", Compiler:"v8", Platform:"linux/amd64"}');
    fs.writeFileSync(file, 'not json');
    expect(readBuildStamp(file)).toEqual(UNSTAMPED);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

class NoKernel implements Dataplane {
  readonly name = 'nk';
  async fullSync(): Promise<SyncReport> { return { messages: 1, bytes: 1, ms: 0 }; }
  async update(): Promise<SyncReport> { return { messages: 1, bytes: 1, ms: 0 }; }
}

test('/metrics: kubernetes_build_info, rest_client_* and the conntrack reconciler metrics per IP family', async () => {
  const s = await startOps({ backend: { name: 'nft' } });
  try {
    const c = cluster('n1', [
      node('n1'),
      svc('dns', { clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] }),
      slice('dns-4', 'dns', [ep('10.244.2.1', { node: 'n2' })], { ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }] }),
      slice('dns-6', 'dns', [ep('fd00:244::1', { node: 'n2' })], { ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }], family: 'IPv6' }),
    ]);
    // A real KernelSink whose conntrack deletion reports 3 IPv4 and 5 IPv6 entries.
    const kernel = new KernelSink(new NoKernel(), { log: () => {}, conntrackDelete: async (f) => (f[0].family === 'ip' ? 3 : 5) });
    const sink = s.ops.attach(c.state, kernel, c.store);
    const sub = c.state.subscribe();
    await sub.ready();
    await sink.apply(sub.take(), c.state);
    sub.close();

    const m = (await get(s.port, '/metrics')).text;
    const info = buildInfo('0.1.0');
    const labels = Object.entries(info).map(([k, v]) => `${k}="${v}"`).join(',');
    expect(m).toContain(`kubernetes_build_info{${labels}} 1\n`);
    expect(m).toContain('# TYPE rest_client_requests_total counter');
    expect(m).toContain('# TYPE rest_client_request_duration_seconds histogram');
    expect(m).toContain('kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"} 3\n');
    expect(m).toContain('kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv6"} 5\n');
    expect(m).toContain('kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv4"} 1\n');
    expect(m).toContain('kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv6"} 1\n');
    // kpng's own total stays.
    expect(m).toContain('kpng_conntrack_entries_deleted_total{backend="nk"} 8\n');
  } finally {
    await s.stop();
  }
});

test.each([['ebpf', 1], ['nft', 1], ['ipvs', undefined]])('a failed --to %s sync counts in kubeproxy_sync_proxy_rules_nftables_sync_failures_total: %s', async (backend, want) => {
  const s = await startOps({ backend: { name: backend as string } });
  try {
    const c = cluster('n1', [node('n1'), svc('web')]);
    const sink = s.ops.attach(c.state, { name: backend as string, apply: async () => { throw new Error('EPERM'); } }, c.store);
    const sub = c.state.subscribe();
    await sub.ready();
    await expect(sink.apply(sub.take(), c.state)).rejects.toThrow('EPERM');
    sub.close();
    const m = (await get(s.port, '/metrics')).text;
    const line = m.split('\n').find((l) => l.startsWith('kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"} '));
    expect(line === undefined ? undefined : Number(line.split(' ')[1])).toBe(want);
  } finally {
    await s.stop();
  }
});

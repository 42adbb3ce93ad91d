// What kpng registers against what upstream kube-proxy v1.37 registers in nftables mode (its
// pkg/proxy/metrics, client-go's rest_client_* through component-base, component-base's own), families
// upstream only shows once they have samples included; then the values behind them: registered_metrics_total
// by stability level, kubernetes_feature_enabled, the metrics port's /healthz and /metrics/slis, and the
// kube transport's request and response sizes, DNS time and transport count on a loopback server.
// test/e2e/metrics-parity.test.ts compares a real kube-proxy's scrape with kpng's.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type * as Prom from 'prom-client';
import { OpsServers } from '../../src/cli/ops';
import type { OpsOptions } from '../../src/cli/kube-proxy-flags';
import { KPNG_FEATURES } from '../../src/metrics/feature-gates';
import { countByStability, stabilityOf } from '../../src/metrics/meta';
import { createProxyMetrics } from '../../src/metrics/proxy-metrics';
import { createRestClientMetrics } from '../../src/metrics/rest-client';
import { Registry } from '../../src/metrics/prom';
import { createTransport, readBody } from '../../src/source/kube/http';
import { createLogger } from '../../src/util/log';
import { parseKlogLine } from '../helpers/klog';

type Type = 'counter' | 'gauge' | 'histogram';
const fam = ['ip_family'];
const vh = ['verb', 'host'];
/** Every family upstream registers in nftables mode (v1.37 sources), with its type and label names. */
const UPSTREAM: Record<string, [Type, string[]]> = {
  kubeproxy_sync_proxy_rules_duration_seconds: ['histogram', fam],
  kubeproxy_sync_full_proxy_rules_duration_seconds: ['histogram', fam],
  kubeproxy_sync_partial_proxy_rules_duration_seconds: ['histogram', fam],
  kubeproxy_sync_proxy_rules_last_timestamp_seconds: ['gauge', fam],
  kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds: ['gauge', fam],
  kubeproxy_network_programming_duration_seconds: ['histogram', fam],
  kubeproxy_sync_proxy_rules_endpoint_changes_pending: ['gauge', []],
  kubeproxy_sync_proxy_rules_endpoint_changes_total: ['counter', []],
  kubeproxy_sync_proxy_rules_service_changes_pending: ['gauge', []],
  kubeproxy_sync_proxy_rules_service_changes_total: ['counter', []],
  kubeproxy_sync_proxy_rules_no_local_endpoints_total: ['gauge', ['traffic_policy', 'ip_family']],
  kubeproxy_sync_proxy_rules_nftables_sync_failures_total: ['counter', fam],
  kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total: ['counter', fam],
  kubeproxy_proxy_healthz_total: ['counter', ['code']],
  kubeproxy_proxy_livez_total: ['counter', ['code']],
  kubeproxy_conntrack_reconciler_sync_duration_seconds: ['histogram', fam],
  kubeproxy_conntrack_reconciler_deleted_entries_total: ['counter', fam],
  rest_client_requests_total: ['counter', ['code', 'method', 'host']],
  rest_client_request_duration_seconds: ['histogram', vh],
  rest_client_dns_resolution_duration_seconds: ['histogram', ['host']],
  rest_client_request_size_bytes: ['histogram', vh],
  rest_client_response_size_bytes: ['histogram', vh],
  rest_client_rate_limiter_duration_seconds: ['histogram', vh],
  rest_client_request_retries_total: ['counter', ['code', 'verb', 'host']],
  rest_client_exec_plugin_ttl_seconds: ['gauge', []],
  rest_client_exec_plugin_certificate_rotation_age: ['histogram', []],
  rest_client_exec_plugin_call_total: ['counter', ['code', 'call_status']],
  rest_client_exec_plugin_policy_call_total: ['counter', ['allowed', 'denied']],
  rest_client_transport_cache_entries: ['gauge', []],
  rest_client_transport_create_calls_total: ['counter', ['result']],
  rest_client_transport_ca_reload_total: ['counter', ['result', 'reason']],
  rest_client_transport_cert_rotation_gc_calls_total: ['counter', []],
  rest_client_transport_cache_gc_calls_total: ['counter', ['result']],
  kubernetes_build_info: ['gauge', ['major', 'minor', 'git_version', 'git_commit', 'git_tree_state', 'build_date', 'go_version', 'compiler', 'platform']],
  kubernetes_feature_enabled: ['gauge', ['name', 'stage']],
  registered_metrics_total: ['counter', ['stability_level', 'deprecated_version']],
  disabled_metrics_total: ['counter', []],
  hidden_metrics_total: ['counter', []],
  cardinality_enforcement_unexpected_categorizations_total: ['counter', []],
  // The API server's libraries kube-proxy links (linked-apiserver.ts).
  aggregator_discovery_aggregation_count_total: ['counter', []],
  apiserver_audit_event_total: ['counter', []],
  apiserver_audit_requests_rejected_total: ['counter', []],
  apiserver_envelope_encryption_dek_cache_fill_percent: ['gauge', []],
  apiserver_storage_data_key_generation_duration_seconds: ['histogram', []],
  apiserver_storage_data_key_generation_failures_total: ['counter', []],
  apiserver_storage_envelope_transformation_cache_misses_total: ['counter', []],
  apiserver_validation_declarative_validation_mismatch_total: ['counter', []],
  apiserver_validation_declarative_validation_panic_total: ['counter', []],
  apiserver_validation_duplicate_validation_error_total: ['counter', []],
  apiserver_webhooks_x509_insecure_sha1_total: ['counter', []],
  apiserver_webhooks_x509_missing_san_total: ['counter', []],
};
/** And on /metrics/slis. */
const UPSTREAM_SLIS: Record<string, [Type, string[]]> = {
  kubernetes_healthcheck: ['gauge', ['name', 'type']],
  kubernetes_healthchecks_total: ['counter', ['name', 'type', 'status']],
  process_start_time_seconds: ['gauge', []],
};

/** name -> [type, sorted label names] of a registry's families. */
async function definitions(registry: Prom.Registry): Promise<Record<string, [string, string[]]>> {
  const json = await registry.getMetricsAsJSON();
  return Object.fromEntries(json.map((f) => {
    const labels = (registry.getSingleMetric(f.name) as unknown as { labelNames?: string[] }).labelNames ?? [];
    return [f.name, [String(f.type), [...labels].sort()]];
  }));
}
const sorted = (want: Record<string, [Type, string[]]>) => Object.fromEntries(Object.entries(want).map(([n, [t, l]]) => [n, [t, [...l].sort()]]));

const OPTS: OpsOptions = { metricsBindAddress: '127.0.0.1:0', healthzBindAddress: null, bindAddressHardFail: true, conntrack: null, oomScoreAdj: undefined };

/** OpsServers with its metrics server on a free port. */
async function startOps(): Promise<{ ops: OpsServers; port: number }> {
  const lines: string[] = [];
  const ops = new OpsServers(OPTS, { node: 'n1', backend: { name: 'nft', kernel: true }, syncPeriodMs: 30_000, once: false, log: createLogger({ write: (l) => lines.push(l) }), version: '0.1.0' });
  await ops.start();
  const served = lines.map((l) => /^metrics: serving on http:\/\/127\.0\.0\.1:(\d+)$/.exec(parseKlogLine(l)?.message ?? '')).find(Boolean);
  if (!served) throw new Error(`no "serving on" line in:\n${lines.join('\n')}`);
  return { ops, port: Number(served[1]) };
}

async function get(port: number, path: string, method = 'GET'): Promise<{ status: number; type: string | null; text: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

test('every family upstream registers in nftables mode is registered, with its type and label names', async () => {
  const m = createProxyMetrics({ processMetrics: false });
  const s = await startOps(); // kubernetes_build_info is registered by OpsServers
  try {
    const main = await definitions(s.ops.metrics.registry);
    const missing = Object.keys(UPSTREAM).filter((n) => !(n in main));
    expect(missing).toEqual([]);
    expect(Object.fromEntries(Object.keys(UPSTREAM).map((n) => [n, main[n]]))).toEqual(sorted(UPSTREAM));
    const slis = await definitions(m.slis.registry);
    expect(slis).toEqual(sorted(UPSTREAM_SLIS));
  } finally {
    await s.ops.stop();
  }
});

test('registered_metrics_total counts every family of both registries by stability level, the runtime\'s aside', async () => {
  expect(['registered_metrics_total', 'kubernetes_feature_enabled', 'hidden_metrics_total'].map(stabilityOf)).toEqual(['BETA', 'BETA', 'BETA']);
  expect(['kubernetes_healthcheck', 'kubeproxy_sync_proxy_rules_duration_seconds', 'kpng_state_items'].map(stabilityOf)).toEqual(['STABLE', 'ALPHA', 'ALPHA']);
  expect(countByStability(['a', 'b', 'registered_metrics_total', 'kubernetes_healthchecks_total'])).toEqual(new Map([['ALPHA', 2], ['BETA', 1], ['STABLE', 1]]));
  const s = await startOps();
  try {
    s.ops.metrics.registerProcessMetrics();
    const names = [...s.ops.metrics.registry.getMetricsAsArray(), ...s.ops.metrics.slis.registry.getMetricsAsArray()].map((f) => f.name);
    expect(names.some((n) => n.startsWith('nodejs_'))).toBe(true);
    const counted = names.filter((n) => !/^(process|nodejs)_/.test(n)).length + 1; // the SLIs' process_start_time_seconds is component-base's
    const text = (await get(s.port, '/metrics')).text;
    const sample = (level: string) => Number(new RegExp(`^registered_metrics_total\\{stability_level="${level}",deprecated_version=""\\} (\\d+)$`, 'm').exec(text)?.[1]);
    // component-base's four and the linked API server's four; its one INTERNAL; the SLIs' two.
    expect(sample('BETA')).toBe(8);
    expect(sample('INTERNAL')).toBe(1);
    expect(sample('STABLE')).toBe(2);
    expect(sample('ALPHA') + sample('BETA') + sample('INTERNAL') + sample('STABLE')).toBe(counted);
    expect(text).toMatch(/^disabled_metrics_total 0$/m);
    expect(text).toMatch(/^hidden_metrics_total 0$/m);
  } finally {
    await s.ops.stop();
  }
});

test('kubernetes_feature_enabled: the gates kube-proxy consults, with what kpng does', async () => {
  const s = await startOps();
  try {
    const text = (await get(s.port, '/metrics')).text;
    for (const f of KPNG_FEATURES) expect(text).toContain(`kubernetes_feature_enabled{name="${f.name}",stage="${f.stage}"} ${f.enabled ? 1 : 0}\n`);
    expect(text).toContain('kubernetes_feature_enabled{name="NFTablesNetlink",stage="BETA"} 1\n');
    expect(text).toContain('kubernetes_feature_enabled{name="KubeProxyNFTablesLocalhostNodePorts",stage="ALPHA"} 0\n');
    // The client-go families that never move in kpng are there, at client-go's values for "nothing".
    expect(text).toContain('rest_client_exec_plugin_ttl_seconds +Inf\n');
    expect(text).toContain('rest_client_transport_cert_rotation_gc_calls_total 0\n');
    expect(text).toContain('# TYPE kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total counter\n');
  } finally {
    await s.ops.stop();
  }
});

test('the metrics port\'s /healthz (ping) answers as component-base\'s and feeds /metrics/slis; DELETE resets the SLIs', async () => {
  const s = await startOps();
  try {
    const text = 'text/plain; charset=utf-8';
    expect(await get(s.port, '/healthz')).toEqual({ status: 200, type: text, text: 'ok' });
    expect(await get(s.port, '/healthz?verbose')).toEqual({ status: 200, type: text, text: '[+]ping ok\nhealthz check passed\n' });
    expect(await get(s.port, '/healthz?verbose&exclude=ping&exclude=etcd')).toEqual({ status: 200, type: text,
      text: '[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for "etcd"\nhealthz check passed\n' });
    expect(await get(s.port, '/healthz/ping')).toEqual({ status: 200, type: text, text: 'ok' });
    expect((await get(s.port, '/healthz/etcd')).status).toBe(404);
    const slis = await get(s.port, '/metrics/slis');
    expect(slis.status).toBe(200);
    expect(slis.type).toMatch(/^text\/plain; version=0\.0\.4/);
    // Two checks ran (the excluded one did not).
    expect(slis.text).toContain('kubernetes_healthcheck{name="ping",type="healthz"} 1\n');
    expect(slis.text).toContain('kubernetes_healthchecks_total{name="ping",type="healthz",status="success"} 2\n');
    expect(slis.text).toMatch(/^process_start_time_seconds \d{10}$/m);
    expect(await get(s.port, '/metrics/slis', 'DELETE')).toEqual({ status: 200, type: text, text: 'metrics reset\n' });
    expect((await get(s.port, '/metrics/slis')).text).not.toContain('kubernetes_healthchecks_total{');
  } finally {
    await s.ops.stop();
  }
});

test('the kube transport feeds client-go\'s sizes, DNS time and transport count', async () => {
  const server = http.createServer((req, res) => {
    if (req.url!.includes('watch=1')) { res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"type":"BOOKMARK"}\n'); return; }
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"items":[1,2,3]}'); // 17 bytes
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const registry = new Registry();
  const m = createRestClientMetrics(registry);
  try {
    // By name: a new connection resolves it. Each request its own connection (no agent keeps them here).
    const t = createTransport(`http://localhost:${port}`, async (o) => { o.agent = false; }, 'test', m);
    const signal = new AbortController().signal;
    await readBody(await t.get('/api/v1/services?limit=500', signal));
    await readBody(await t.get('/api/v1/services?watch=1&resourceVersion=5', signal));
    await new Promise((r) => setImmediate(r));
    const text = await registry.metrics();
    const host = `localhost:${port}`;
    // The list sent no body and got 17 bytes; the watch is not measured (client-go streams watches unmeasured).
    expect(text).toContain(`rest_client_request_size_bytes_count{verb="GET",host="${host}"} 1\n`);
    expect(text).toContain(`rest_client_request_size_bytes_sum{verb="GET",host="${host}"} 0\n`);
    expect(text).toContain(`rest_client_response_size_bytes_count{verb="GET",host="${host}"} 1\n`);
    expect(text).toContain(`rest_client_response_size_bytes_sum{verb="GET",host="${host}"} 17\n`);
    expect(text).toContain('rest_client_dns_resolution_duration_seconds_count{host="localhost"} 2\n');
    expect(text).toContain('rest_client_transport_create_calls_total{result="miss"} 1\n');
    expect(text).toContain('rest_client_transport_cache_entries 1\n');
    // An IP address is not resolved.
    const byIp = createTransport(`http://127.0.0.1:${port}`, async () => {}, 'test', m);
    await readBody(await byIp.get('/api/v1/nodes', signal));
    expect(await registry.metrics()).not.toContain('rest_client_dns_resolution_duration_seconds_count{host="127.0.0.1"}');
    expect(await registry.metrics()).toContain('rest_client_transport_cache_entries 2\n');
  } finally {
    await new Promise((r) => server.close(r));
  }
});

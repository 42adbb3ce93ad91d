// hack/chaos/report.ts and proxy-state.ts: the Markdown a chaos run writes, the metrics it reads and
// /healthz's answers collapsed into runs.
import { describeHealth, describeMetrics, parseMetrics } from '../hack/chaos/proxy-state';
import { renderRun, summaryCells, type ScenarioResult } from '../hack/chaos/report';

const METRICS = `# HELP kpng_syncs_total Syncs.
# TYPE kpng_syncs_total counter
kpng_syncs_total{backend="nft",result="ok"} 40
kpng_syncs_total{backend="nft",result="failed"} 2
kpng_kernel_state_lost_total{backend="nft"} 1
kpng_kernel_state_lost_total{backend="aggregator"} 2
kubeproxy_sync_proxy_rules_last_timestamp_seconds 1765140000.5
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.1"} 3
`;

describe('chaos report', () => {
  test('metrics: the watched series, summed over the labels they do not name', () => {
    const m = parseMetrics(METRICS);
    expect(m.get('kpng_syncs_total{result="failed"}')).toBe(2);
    expect(m.get('kpng_kernel_state_lost_total')).toBe(3);
    expect(m.get('kubeproxy_sync_proxy_rules_last_timestamp_seconds')).toBe(1765140000.5);
    expect(m.has('kubeproxy_sync_proxy_rules_nftables_sync_failures_total')).toBe(false);
    // Upstream gives one timestamp per IP family: the latest, never their sum.
    const up = parseMetrics('kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1765140000\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1765140003\n');
    expect(up.get('kubeproxy_sync_proxy_rules_last_timestamp_seconds')).toBe(1765140003);
  });

  test('metrics in words: counter increases, a restart, the age of the last sync, none reachable', () => {
    const before = parseMetrics(METRICS);
    const after = parseMetrics(METRICS.replace('result="failed"} 2', 'result="failed"} 5').replace('"aggregator"} 2', '"aggregator"} 0'));
    expect(describeMetrics(before, after, 1765140010.5)).toBe('kpng_syncs_total{result="failed"} +3, kpng_kernel_state_lost_total 1 (restarted), last sync 10.0 s before the end');
    expect(describeMetrics(undefined, before, 1765140000.5)).toContain('kpng_syncs_total{result="failed"} 2');
    expect(describeMetrics(before, undefined, 0)).toBe('metrics not reachable');
  });

  test('/healthz: per node, in time order, runs of one status collapsed', () => {
    const s = [
      { t: 3, node: 'n1', status: 503 as const }, { t: 1, node: 'n1', status: 200 as const }, { t: 2, node: 'n1', status: 200 as const },
      { t: 4, node: 'n1', status: 'down' as const }, { t: 5, node: 'n1', status: 200 as const }, { t: 2, node: 'n2', status: 200 as const },
      { t: 9, node: 'n1', status: 503 as const },
    ];
    expect(describeHealth(s, 'n1', 0, 6)).toBe('200 ×2, 503 ×1, down ×1, 200 ×1');
    expect(describeHealth(s, 'n2', 0, 6)).toBe('200 ×1');
    expect(describeHealth(s, 'n3', 0, 6)).toBe('no sample');
  });

  test('a run: a summary row per scenario, then its probes, figures, /healthz, metrics and log lines', () => {
    const r: ScenarioResult = {
      name: 'tamper-table', title: '`nft delete table` of the proxy', faultAt: 110, recoveredAt: 110.2, from: 100, to: 130,
      probes: [
        { probe: 'host→kc-node1 NodePort', attempted: 150, failed: 1, firstFailure: 0.01, repair: 0.21, unrepaired: false, reasons: 'ECONNREFUSED ×1' },
        { probe: 'pod@kc-node1 tcp', attempted: 100, failed: 0, unrepaired: false },
      ],
      figures: ['table ip kpng re-created 0.05 s after its deletion (nft monitor)'],
      health: [{ node: 'kc-node1', during: '200 ×1', after: '200 ×10' }],
      metrics: [{ node: 'kc-node1', text: 'kpng_kernel_state_lost_total +1' }],
      logs: [{ node: 'kc-node1', matched: 1, lines: ['nft: table kpng deleted by pid 4242 (`nft`): full sync'] }],
    };
    const failedRun: ScenarioResult = { ...r, name: 'api-kill', probes: [{ probe: 'x', attempted: 4, failed: 2, firstFailure: 1, unrepaired: true }], error: 'kube-apiserver not ready | gone', figures: [] };
    const md = renderRun({ proxy: 'kpng, nft backend', command: 'make chaos BACKEND=nft', startedAt: new Date('2026-12-07T22:00:00.123Z'), commit: 'abc1234', results: [r, failedRun] });
    expect(md).toContain('2026-12-07T22:00:00Z, commit abc1234; `make chaos BACKEND=nft`');
    expect(md).toContain('| tamper-table | 1/250 | 0.21 s | table ip kpng re-created 0.05 s after its deletion (nft monitor) |');
    expect(md).toContain('| api-kill | 2/4 | error: kube-apiserver not ready \\| gone |');
    expect(md).toContain('| host→kc-node1 NodePort | 150 | 1 | +0.01 s | 0.21 s | ECONNREFUSED ×1 |');
    expect(md).toContain('| pod@kc-node1 tcp | 100 | 0 | - | - |  |');
    expect(md).toContain('| x | 4 | 2 | +1.00 s | not repaired |  |');
    expect(md).toContain('Window 30.0 s (fault at +10.0 s, fault ended +0.20 s).');
    expect(md).toContain("  - `nft: table kpng deleted by pid 4242 ('nft'): full sync`");
    expect(md).toContain('- /healthz kc-node1: during 200 ×1; after 200 ×10');
    const early = renderRun({ proxy: 'p', command: 'c', startedAt: new Date(0), commit: 'x', results: [{ ...r, probes: [{ probe: 'y', attempted: 3, failed: 1, firstFailure: -0.02, repair: 0.4, unrepaired: false }] }] });
    expect(early).toContain('| y | 3 | 1 | -0.02 s | 0.40 s |  |');
    expect(summaryCells([{ probe: 'a', attempted: 5, failed: 0, unrepaired: false }])).toEqual({ failed: '0/5', repair: 'no failure' });
  });
});

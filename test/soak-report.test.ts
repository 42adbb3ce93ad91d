// hack/chaos/soak-report.ts: `make soak`'s durations, Prometheus parsing, histogram deltas and
// quantiles, least-squares slopes and the report.
import {
  fitLine, histogramDelta, histogramOf, histogramQuantile, parseDuration, parsePrometheus, renderSoak, upward,
  type NodeSample, type SoakResult,
} from '../hack/chaos/soak-report';

const MiB = 1024 * 1024;

describe('soak report', () => {
  test('durations: 2h, 10m, 90s, 1h30m, plain seconds; anything else refused', () => {
    expect(parseDuration('2h')).toBe(7200);
    expect(parseDuration('10m')).toBe(600);
    expect(parseDuration('90s')).toBe(90);
    expect(parseDuration('1h30m')).toBe(5400);
    expect(parseDuration('45')).toBe(45);
    for (const bad of ['', 'h', '10x', '10m junk', '0m']) expect(() => parseDuration(bad)).toThrow(/duration/);
  });

  const text = [
    '# HELP process_resident_memory_bytes Resident memory size in bytes.',
    'process_resident_memory_bytes 7.5e+07',
    'process_open_fds 31',
    'kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="0.5"} 2',
    'kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="1"} 6',
    'kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 8',
    'kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="0.5"} 2',
    'kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="1"} 2',
    'kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 2',
    'kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"} 7',
    'kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 8',
    'kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"} 2',
  ].join('\n');

  test('Prometheus text: values, labels, a histogram summed over every label but le', () => {
    const s = parsePrometheus(text);
    expect(s.find((x) => x.name === 'process_resident_memory_bytes')?.value).toBe(75e6);
    expect(s.find((x) => x.name.endsWith('_bucket'))?.labels).toEqual({ ip_family: 'IPv4', le: '0.5' });
    const h = histogramOf(s, 'kubeproxy_network_programming_duration_seconds')!;
    expect(h.buckets).toEqual([[0.5, 4], [1, 8], [Infinity, 10]]);
    expect(h.count).toBe(10);
    expect(histogramOf(s, 'absent')).toBeUndefined();
  });

  test('histogram deltas and quantiles as histogram_quantile computes them', () => {
    const a = { buckets: [[0.5, 4], [1, 8], [Infinity, 10]] as [number, number][], count: 10, sum: 7 };
    const b = { buckets: [[0.5, 4], [1, 18], [Infinity, 20]] as [number, number][], count: 20, sum: 15 };
    const d = histogramDelta(a, b)!;
    expect(d).toEqual({ buckets: [[0.5, 0], [1, 10], [Infinity, 10]], count: 10, sum: 8 });
    expect(histogramQuantile(d, 0.5)).toBeCloseTo(0.75);
    expect(histogramQuantile(a, 0.25)).toBeCloseTo(0.3125);
    // The rank in the +Inf bucket: the highest finite bound.
    expect(histogramQuantile(a, 0.99)).toBe(1);
    // A restart (counts went down): the new histogram alone.
    expect(histogramDelta(b, a)).toBe(a);
    expect(histogramQuantile({ buckets: [[1, 0], [Infinity, 0]], count: 0, sum: 0 }, 0.5)).toBeUndefined();
  });

  test('least squares: an exact line, its slope; noise around a flat line is not upward', () => {
    const line = fitLine([0, 1, 2, 3].map((t) => ({ t, v: 5 + 2 * t })))!;
    expect(line.slope).toBeCloseTo(2);
    expect(line.intercept).toBeCloseTo(5);
    expect(line.residualSd).toBeCloseTo(0);
    expect(fitLine([{ t: 0, v: 1 }, { t: 1, v: 2 }])).toBeUndefined();
    // A sawtooth around 80 MiB over 2 h: no slope beyond noise.
    const saw = Array.from({ length: 240 }, (_, i) => ({ t: i / 120, v: 80 + (i % 10) - 4.5 }));
    const flat = fitLine(saw)!;
    expect(Math.abs(flat.slope)).toBeLessThan(1);
    expect(upward(flat, 2)).toBe(false);
    // 3 MiB/h on the same sawtooth over 2 h: upward.
    const leak = fitLine(saw.map((p) => ({ t: p.t, v: p.v + 3 * p.t })))!;
    expect(leak.slope).toBeCloseTo(3, 0);
    expect(upward(leak, 2)).toBe(true);
  });

  test('the report: slopes per node and series, windows with probes and latency', () => {
    const t0 = 1_800_000_000;
    const samples: NodeSample[] = [];
    for (let i = 0; i <= 20; i++) {
      const t = t0 + 30 * i;
      samples.push({ t, node: 'kc-node1', pod: 'u1', rssBytes: (70 + (i % 2)) * MiB, heapBytes: 20 * MiB, fds: 30,
        programming: { buckets: [[0.5, i], [1, 2 * i], [Infinity, 2 * i]], count: 2 * i, sum: i } });
      samples.push({ t, node: 'kc-node2', pod: i < 10 ? 'u2' : 'u3', rssBytes: (60 + i) * MiB, fds: 28 + i });
    }
    const r: SoakResult = {
      proxy: 'kpng, nft backend', command: 'make soak BACKEND=nft DURATION=10m', commit: 'abc1234',
      startedAt: t0, endedAt: t0 + 600, warmupUntil: t0 + 60, samples,
      probes: [{ from: t0, to: t0 + 295, attempted: 1000, failed: 1, reasons: ['pod@kc-node1 udp fail'] }, { from: t0 + 300, to: t0 + 595, attempted: 1000, failed: 0, reasons: [] }],
      churn: { ok: 100, failed: 0 },
    };
    const md = renderSoak(r, 300);
    expect(md).toMatch(/^# Soak: kpng, nft backend\n/);
    expect(md).toContain('commit abc1234; `make soak BACKEND=nft DURATION=10m`; 10.0 min, 42 samples');
    // kc-node2's RSS grows 1 MiB per 30 s: 120 MiB/h, upward; kc-node1's alternates: not.
    expect(md).toMatch(/\| kc-node2 \| RSS \| 62\.0 → 80\.0 MiB \| [^|]+ \| \+120 ± [\d.]+ MiB\/h \|[^\n]*\*\*upward\*\* \|/);
    expect(md).toMatch(/\| kc-node1 \| RSS \|[^\n]*no upward slope beyond noise \|/);
    expect(md).toMatch(/\| kc-node2 \| JS heap used \| - \|[^\n]*too few samples \|/);
    expect(md).toContain('Proxy restarts seen (a new pod): kc-node1 0, kc-node2 1.');
    // First window: programmed 18 (node1's counts 0 -> 18 by t0+270), half of them at or below 0.5 s.
    expect(md).toMatch(/\| 0 \| 1\/1000 \| 18 \| 500 ms \| 900 ms \| 990 ms \| 71\.0 MiB, 30 \| 69\.0 MiB, 37 \|/);
    expect(md).toContain('Probes over the whole run: 1/2000 failed (pod@kc-node1 udp fail ×1).');
    // A run that ends a second past its last window has no empty row for that second.
    expect(renderSoak({ ...r, endedAt: t0 + 601, samples: samples.filter((s) => s.t < t0 + 600) }, 300)).not.toMatch(/^\| 10 \|/m);
  });
});

// kpng's metrics port against upstream kube-proxy's (the v1.37 binary hack/kube-proxy/build.sh builds,
// nftables mode): both run from kube-proxy's own flags, each in its own network namespace (mpar-*),
// against one real kube-apiserver holding the same Services and EndpointSlices; once both have synced,
// /metrics and /metrics/slis are scraped from inside each namespace (127.0.0.1:10249, the default) and
// every family upstream serves must be in kpng's with the same type and the same label names (kpng may
// serve more; Go's go_* and process_* families are the runtime's, not kube-proxy's). /healthz on the
// same port must answer as upstream's does. compareFamilies is checked first on made-up input, so that
// a family removed, retyped or relabelled is known to be reported.
//
// KPNG_METRICS_PARITY_OUT=DIR keeps every scrape in DIR (upstream-metrics.txt, kpng-metrics.txt, ...).
process.env.KPNG_BENCH_NETNS_PREFIX = 'mpar'; // bench/vs-upstream's Lab names its namespaces with it

import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Lab } from '../../bench/vs-upstream/lab';
import { upstream } from '../../bench/vs-upstream/proxies';
import { POD_CIDR } from '../../bench/vs-upstream/cluster';
import { kpngMain, nodeBinary } from '../shared/kpng-process';
import { createProxyMetrics } from '../../src/metrics/proxy-metrics';
import { gated, need } from '../helpers/gate';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';
import { startControlPlane, type ControlPlane } from './support/controlplane';

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
const FORWARDER = path.join(ROOT, 'dist/bench/vs-upstream/forwarder.js');
const BUILD = path.join(ROOT, 'hack/kube-proxy/build.sh');
const KUBE_PROXY = spawnSync(BUILD, ['--print-path'], { encoding: 'utf8' }).stdout.trim();

// ---- The Prometheus text format, as far as the comparison needs it ----------------------------------

/** One metric family: its type, the label names its samples carry (histograms' le and summaries'
 *  quantile aside) and how many samples it has. `defined`: the label names were taken from the
 *  family's definition in kpng's code, as it had no samples (labelsFromDefinitions). */
export interface Family { type: string; labels: string[]; samples: number; defined?: boolean }
export type Families = Map<string, Family>;

/** The families of a Prometheus text exposition, named by their `# TYPE` lines. */
export function parseFamilies(text: string): Families {
  const out: Families = new Map();
  const labels = new Map<string, Set<string>>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)/.exec(line);
    if (t) { out.set(t[1], { type: t[2], labels: [], samples: 0 }); labels.set(t[1], new Set()); continue; }
    if (line === '' || line.startsWith('#')) continue;
    const s = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s/.exec(line);
    if (!s) continue;
    // A histogram's or summary's samples are named after their family with a suffix.
    const name = [s[1], s[1].replace(/_(bucket|sum|count)$/, '')].find((n) => out.has(n));
    if (!name) continue;
    out.get(name)!.samples++;
    for (const m of (s[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)) {
      if (!(m[1] === 'le' && name !== s[1]) && m[1] !== 'quantile') labels.get(name)!.add(m[1]);
    }
  }
  for (const [name, f] of out) f.labels = [...labels.get(name)!].sort();
  return out;
}

/** Families that are the language runtime's, not kube-proxy's: never compared. */
export const RUNTIME_FAMILY = /^(go|process)_/;

/**
 * What is wrong with kpng's families against upstream's: each upstream family (the runtime's aside)
 * missing in kpng, of another type, or with other label names. Label names are only known from
 * samples: a family kpng serves without any while upstream has some is reported too. Families only
 * kpng has are its own business.
 */
export function compareFamilies(up: Families, kpng: Families): string[] {
  const problems: string[] = [];
  for (const [name, u] of [...up].sort(([a], [b]) => a.localeCompare(b))) {
    if (RUNTIME_FAMILY.test(name)) continue;
    const k = kpng.get(name);
    if (!k) { problems.push(`${name}: missing (upstream: ${u.type} {${u.labels.join(',')}})`); continue; }
    if (k.type !== u.type) problems.push(`${name}: type ${k.type}, upstream ${u.type}`);
    if (u.samples > 0 && k.samples === 0 && !k.defined) problems.push(`${name}: no samples, so no label names to compare (upstream: {${u.labels.join(',')}})`);
    else if (u.samples > 0 && k.labels.join(',') !== u.labels.join(',')) problems.push(`${name}: labels {${k.labels.join(',')}}, upstream {${u.labels.join(',')}}`);
  }
  return problems;
}

/** `families` with the label names of those without samples taken from kpng's own definitions
 *  (createProxyMetrics: the code the process runs), and the names of the families so filled. */
export function labelsFromDefinitions(families: Families, definitions: Map<string, readonly string[]>): { families: Families; filled: string[] } {
  const out: Families = new Map(families);
  const filled: string[] = [];
  for (const [name, f] of families) {
    const labels = definitions.get(name);
    if (f.samples > 0 || !labels) continue;
    out.set(name, { ...f, labels: [...labels].sort(), defined: true });
    filled.push(name);
  }
  return { families: out, filled };
}

/** The label names of every family kpng's metrics define. */
function kpngDefinitions(): Map<string, readonly string[]> {
  const m = createProxyMetrics({ processMetrics: false });
  const all = [...m.registry.getMetricsAsArray(), ...m.slis.registry.getMetricsAsArray()];
  return new Map(all.map((f) => [f.name, (f as unknown as { labelNames?: readonly string[] }).labelNames ?? []]));
}

/**
 * Upstream families kpng serves without samples in this scenario, with why: their label names come
 * from kpng's definitions instead. Anything else without samples fails the comparison.
 */
const NO_SAMPLES_IN_KPNG: Record<string, string> = {};

describe('compareFamilies', () => {
  const up = parseFamilies([
    '# HELP a_total A.', '# TYPE a_total counter', 'a_total{code="200",host="h"} 3',
    '# TYPE b_seconds histogram', 'b_seconds_bucket{verb="GET",le="0.1"} 1', 'b_seconds_bucket{verb="GET",le="+Inf"} 1', 'b_seconds_sum{verb="GET"} 0.05', 'b_seconds_count{verb="GET"} 1',
    '# TYPE c gauge', 'c 1',
    '# TYPE d_total counter',
    '# TYPE go_goroutines gauge', 'go_goroutines 7',
  ].join('\n'));
  const same = parseFamilies([
    '# TYPE a_total counter', 'a_total{host="x",code="500"} 1',
    '# TYPE b_seconds histogram', 'b_seconds_bucket{le="+Inf",verb="GET"} 2', 'b_seconds_sum{verb="GET"} 1', 'b_seconds_count{verb="GET"} 2',
    '# TYPE c gauge', 'c 0', '# TYPE d_total counter', '# TYPE kpng_own gauge', 'kpng_own 1',
  ].join('\n'));

  test('parses types, label names (not le) and samples per family', () => {
    expect(up.get('b_seconds')).toEqual({ type: 'histogram', labels: ['verb'], samples: 4 });
    expect(up.get('a_total')).toEqual({ type: 'counter', labels: ['code', 'host'], samples: 1 });
    expect(up.get('d_total')).toEqual({ type: 'counter', labels: [], samples: 0 });
  });

  test('the same families (in another order, with other values, plus kpng\'s own, without go_*) pass', () => {
    expect(compareFamilies(up, same)).toEqual([]);
  });

  test('a family removed, retyped, relabelled or without samples is reported', () => {
    const broken = new Map(same);
    broken.delete('c');
    broken.set('a_total', { type: 'counter', labels: ['code'], samples: 1 });
    broken.set('b_seconds', { type: 'summary', labels: ['verb'], samples: 3 });
    broken.set('d_total', { type: 'counter', labels: [], samples: 0 });
    expect(compareFamilies(up, broken)).toEqual([
      'a_total: labels {code}, upstream {code,host}',
      'b_seconds: type summary, upstream histogram',
      'c: missing (upstream: gauge {})',
    ]);
    broken.set('c', { type: 'gauge', labels: [], samples: 0 });
    expect(compareFamilies(up, broken)).toContain('c: no samples, so no label names to compare (upstream: {})');
  });

  test('label names from the definitions stand in for samples, and are compared', () => {
    const noSamples = parseFamilies('# TYPE a_total counter\n# TYPE b_seconds histogram\n# TYPE c gauge\nc 1\n# TYPE d_total counter\n');
    const { families, filled } = labelsFromDefinitions(noSamples, new Map([['a_total', ['host', 'code']], ['b_seconds', ['host']], ['c', ['x']]]));
    expect(filled).toEqual(['a_total', 'b_seconds']);
    expect(compareFamilies(up, families)).toEqual(['b_seconds: labels {host}, upstream {verb}']);
  });
});

// ---- The two proxies side by side ------------------------------------------------------------------

interface Answer { status: number; type: string; body: string }

/** Keeps `text` as DIR/<what>.txt when KPNG_METRICS_PARITY_OUT=DIR. */
function keep(what: string, text: string): void {
  const out = process.env.KPNG_METRICS_PARITY_OUT;
  if (!out) return;
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, `${what}.txt`), text);
}

const execFileP = promisify(execFile);

/** An HTTP request from inside a namespace (curl): status, Content-Type and body; status 0 when nothing answered. */
async function inNs(netns: string, url: string, method = 'GET'): Promise<Answer> {
  const marker = '\n--mpar-status--';
  try {
    const { stdout } = await execFileP('ip', ['netns', 'exec', netns, 'curl', '-sS', '-X', method, '-w', `${marker}%{http_code} %{content_type}`, url], { maxBuffer: 64 << 20 });
    const at = stdout.lastIndexOf(marker);
    const [status, ...type] = stdout.slice(at + marker.length).split(' ');
    return { status: Number(status), type: type.join(' '), body: stdout.slice(0, at) };
  } catch {
    return { status: 0, type: '', body: '' };
  }
}

/** The metrics port as each proxy serves it by default, inside its own namespace. */
const METRICS = 'http://127.0.0.1:10249';
const HEALTHZ = 'http://127.0.0.1:10256';

const d = gated(need.netns(), need.built(CLI), need.built(FORWARDER),
  need.that('upstream kube-proxy', KUBE_PROXY !== '' && fs.existsSync(KUBE_PROXY), 'run hack/kube-proxy/build.sh (needs Go; bench:vs-upstream builds it too)')).describe;

d('the metrics port: kpng serves every family upstream kube-proxy serves in nftables mode', () => {
  let cp: ControlPlane;
  const labs: { name: string; lab: Lab }[] = [];
  const scrapes = new Map<string, Answer>();

  const must = async (method: string, p: string, body?: unknown) => {
    const r = await cp.request(method, p, body);
    if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${p}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    return r.body;
  };
  const output = (name: string) => labs.find((l) => l.name === name)!.lab.stderrTail.slice(-30).join('\n');

  /** Polls until `ok` holds for a proxy's answer; the failure names the proxy and shows its last output. */
  const until = async (name: string, url: string, ok: (a: Answer) => boolean, timeoutMs = 90_000): Promise<Answer> => {
    const { lab } = labs.find((l) => l.name === name)!;
    const t0 = Date.now();
    for (;;) {
      const a = await inNs(lab.netns, url);
      if (ok(a)) return a;
      if (Date.now() - t0 > timeoutMs || !lab.proxyRunning) {
        keep(`${name}-last-answer`, a.body);
        throw new Error(`${name}: ${url} never answered as expected (last: ${a.status} ${a.body.slice(0, 300)})\n${name} output:\n${output(name)}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  /** A scrape, kept for the tests (and in KPNG_METRICS_PARITY_OUT when set). */
  const scrape = async (name: string, p: string): Promise<Answer> => {
    const a = await until(name, `${METRICS}${p}`, (x) => x.status === 200);
    scrapes.set(`${name} ${p}`, a);
    keep(`${name}${p.replace(/\//g, '-')}`, a.body);
    return a;
  };

  beforeAll(async () => {
    cp = await startControlPlane({ log: () => {} });
    await must('POST', NODES, newNode('n1', 'zone-a'));
    await must('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date()));
    // A TCP service, a UDP one (conntrack clean-ups), one with a Local internal policy and no local
    // endpoint (the no-local-endpoints gauge).
    await must('POST', SERVICES('default'), newService('web'));
    await must('POST', SLICES('default'), newEndpointSlice('web-1', 'web', [{ ip: '10.244.1.5', nodeName: 'n1' }]));
    await must('POST', SERVICES('default'), newService('dns', { ports: [{ name: 'dns', port: 53, targetPort: 53, protocol: 'UDP' }] }));
    await must('POST', SLICES('default'), newEndpointSlice('dns-1', 'dns', [{ ip: '10.244.1.6', nodeName: 'n1' }], { ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] }));
    await must('POST', SERVICES('default'), newService('local', { internalTrafficPolicy: 'Local' }));
    await must('POST', SLICES('default'), newEndpointSlice('local-1', 'local', [{ ip: '10.244.2.7', nodeName: 'n2' }]));

    const port = Number(new URL(cp.server).port);
    const argv = upstream(KUBE_PROXY).argv(cp.kubeconfigPath, 'n1', POD_CIDR);
    // Upstream's only requests that client-go times, sizes and rate-limits are not watches: the Event
    // it posts at start. kpng posts no Event, and with watch-list its every request is a watch; with
    // paginated lists (a test knob of the kube source) its lists are such requests, and give those
    // families samples to compare.
    const runs = [['upstream', argv, undefined], ['kpng', [nodeBinary(), kpngMain(), ...argv.slice(1)], { KPNG_KUBE_WATCH_LIST: '0' }]] as const;
    for (const [name, cmd, env] of runs) {
      const lab = await Lab.create(`${name}-${process.pid % 10000}`, port);
      labs.push({ name, lab });
      lab.startProxy([...cmd], false, env);
    }
    // Both synced (a last-sync timestamp), then a change after the start: network programming latency
    // is measured from its trigger time, and an update is a partial sync.
    const synced = (a: Answer) => a.status === 200 && /^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{/m.test(a.body);
    for (const { name } of labs) await until(name, `${METRICS}/metrics`, synced);
    await must('POST', SLICES('default'), newEndpointSlice('web-2', 'web', [{ ip: '10.244.1.8', nodeName: 'n1' }],
      { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString() } })); // with its milliseconds: both proxies started within the second
    const programmed = (a: Answer) => a.status === 200 && /^kubeproxy_network_programming_duration_seconds_count\{[^}]*\} [1-9]/m.test(a.body);
    for (const { name } of labs) await until(name, `${METRICS}/metrics`, programmed);
    // The probes answered once on each port (their counters, and the SLIs of the metrics port's /healthz).
    for (const { name } of labs) {
      for (const p of ['/healthz', '/livez']) await until(name, `${HEALTHZ}${p}`, (a) => a.status === 200);
      await until(name, `${METRICS}/healthz`, (a) => a.status === 200);
    }
    for (const { name } of labs) for (const p of ['/metrics', '/metrics/slis']) await scrape(name, p);
  }, 300_000);

  afterAll(async () => {
    for (const { lab } of labs) await lab.stop().catch(() => undefined);
    await cp?.stop();
  }, 60_000);

  const families = (name: string, p: string) => parseFamilies(scrapes.get(`${name} ${p}`)!.body);

  test('/metrics: every upstream family, with its type and label names', () => {
    const up = families('upstream', '/metrics');
    const { families: kp, filled } = labelsFromDefinitions(families('kpng', '/metrics'), kpngDefinitions());
    // Only the families known to have no samples in kpng, and only those upstream has samples of.
    const unsampled = filled.filter((n) => (up.get(n)?.samples ?? 0) > 0);
    expect(unsampled).toEqual(Object.keys(NO_SAMPLES_IN_KPNG));
    for (const n of unsampled) console.log(`metrics-parity: ${n}: labels from kpng's definition, no samples: ${NO_SAMPLES_IN_KPNG[n]}`);
    // The comparison is only as good as what upstream served: kube-proxy's, client-go's and
    // component-base's families, with samples.
    for (const f of ['kubeproxy_sync_proxy_rules_duration_seconds', 'rest_client_requests_total', 'kubernetes_build_info', 'registered_metrics_total', 'kubernetes_feature_enabled']) {
      expect(up.get(f)?.samples ?? 0).toBeGreaterThan(0);
    }
    const compared = [...up.keys()].filter((n) => !RUNTIME_FAMILY.test(n));
    console.log(`metrics-parity: ${compared.length} upstream families compared: ${compared.join(' ')}\nonly in kpng's scrape: ${[...kp.keys()].filter((n) => !up.has(n) && !RUNTIME_FAMILY.test(n)).join(' ')}`);
    expect(compareFamilies(up, kp)).toEqual([]);
    // And the check bites on these very scrapes: a family taken out of kpng's is reported.
    const without = new Map(kp);
    without.delete('rest_client_request_size_bytes');
    expect(compareFamilies(up, without)).toEqual([expect.stringMatching(/^rest_client_request_size_bytes: missing/)]);
  });

  test('/metrics/slis: the same families; the metrics port\'s /healthz was counted', () => {
    const up = families('upstream', '/metrics/slis');
    const kp = families('kpng', '/metrics/slis');
    expect(up.get('kubernetes_healthchecks_total')?.samples ?? 0).toBeGreaterThan(0);
    expect(compareFamilies(up, kp)).toEqual([]);
    const ping = /^kubernetes_healthcheck\{name="ping",type="healthz"\} 1$/m;
    for (const name of ['upstream', 'kpng']) expect(scrapes.get(`${name} /metrics/slis`)!.body).toMatch(ping);
    // Both say the Prometheus text format.
    for (const name of ['upstream', 'kpng']) expect(scrapes.get(`${name} /metrics/slis`)!.type).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  test('/healthz, its verbose and exclude forms, /healthz/ping and unknown paths answer as upstream\'s', async () => {
    const answers: Record<string, Answer[]> = {};
    for (const p of ['/healthz', '/healthz?verbose', '/healthz?verbose&exclude=ping&exclude=etcd', '/healthz/ping', '/healthz/nope', '/nope']) {
      answers[p] = await Promise.all(labs.map(({ lab }) => inNs(lab.netns, `${METRICS}${p}`)));
    }
    for (const [p, [up, kp]] of Object.entries(answers)) {
      // Go's 404 says its Content-Type with a charset too; bodies as they are.
      expect({ p, ...kp }).toEqual({ p, ...up });
    }
    expect(answers['/healthz'][0]).toEqual({ status: 200, type: 'text/plain; charset=utf-8', body: 'ok' });
  });

  test('DELETE /metrics/slis resets the SLIs, as upstream\'s handler does', async () => {
    for (const { name, lab } of labs) {
      const del = await inNs(lab.netns, `${METRICS}/metrics/slis`, 'DELETE');
      expect({ name, status: del.status, body: del.body }).toEqual({ name, status: 200, body: 'metrics reset\n' });
      const after = parseFamilies((await inNs(lab.netns, `${METRICS}/metrics/slis`)).body);
      expect({ name, samples: after.get('kubernetes_healthchecks_total')?.samples ?? 0 }).toEqual({ name, samples: 0 });
    }
  });
});

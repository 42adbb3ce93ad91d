// bench:scale's pure parts: ClusterLoader2's counts, the seeded plan, the SLI as Prometheus'
// histogram_quantile computes it, and the expected kernel table from API objects (topology,
// terminating fallback, ports by name). The harness itself runs in test/e2e/scale-harness.test.ts.
import { profileFor } from '../bench/scale/profile';
import { planLoad, replicasAfter } from '../bench/scale/load-plan';
import { histogramQuantile, increase, parseHistogram, quantiles } from '../bench/scale/sli';
import { expectedClusterIps } from '../bench/scale/expected';
import { serviceObject, deploymentObject } from '../bench/scale/objects';

describe('profiles', () => {
  test('100 nodes: the load config\'s counts (3 big, 25 medium, 300 small Deployments; half as many Services)', () => {
    const p = profileFor(100);
    expect(p.namespaces).toBe(1);
    expect(p.deployments).toEqual({ big: 3, medium: 25, small: 300 });
    expect(p.services).toEqual({ big: 2, medium: 13, small: 150 });
    expect(p.pods).toBe(3 * 250 + 25 * 30 + 300 * 5);
  });
  test('1,000 and 5,000 nodes: one namespace per 100 nodes', () => {
    expect(profileFor(1000).namespaces).toBe(10);
    expect(profileFor(5000).pods).toBe(50 * 3000);
  });
  test('20 nodes: every node in one namespace, no big Deployment', () => {
    const p = profileFor(20);
    expect(p.deployments).toEqual({ big: 0, medium: 5, small: 60 });
    expect(p.pods).toBe(450);
  });
  test('bad sizes are refused', () => {
    expect(() => profileFor(0)).toThrow(/positive/);
    expect(() => profileFor(10, 0)).toThrow(/throughput/);
  });
});

describe('plan', () => {
  test('the same seed gives the same plan, another seed another one', () => {
    const a = JSON.stringify(planLoad(profileFor(100), 1));
    expect(JSON.stringify(planLoad(profileFor(100), 1))).toBe(a);
    expect(JSON.stringify(planLoad(profileFor(100), 2))).not.toBe(a);
  });
  test('phases spread their operations over the time limit, sorted; every Deployment is scaled within [X/2, 3X/2]', () => {
    const plan = planLoad(profileFor(100, 10), 3);
    const create = plan.phases[0];
    expect(create.timeLimit).toBe(300);
    const deps = create.ops.filter((o) => o.op === 'create-deployment');
    expect(deps).toHaveLength(328);
    expect(deps.every((o, i) => i === 0 || o.at >= deps[i - 1].at)).toBe(true);
    expect(Math.max(...deps.map((o) => o.at))).toBeLessThanOrEqual(300);
    for (const o of plan.phases[1].ops) {
      if (o.op !== 'scale') throw new Error('scale phase holds only scales');
      const x = o.deployment.replicas;
      expect(o.replicas).toBeGreaterThanOrEqual(Math.floor(x / 2));
      expect(o.replicas).toBeLessThanOrEqual(Math.floor((3 * x) / 2));
    }
    const after = replicasAfter(plan, 'scale');
    expect(after.size).toBe(328);
    expect(replicasAfter(plan, 'delete').size).toBe(0);
  });
  test('every feature appears at 100 nodes; half the Deployments back a Service', () => {
    const plan = planLoad(profileFor(100), 1);
    for (const k of ['multiPort', 'nodePortLocal', 'sessionAffinity', 'preferClose'] as const) expect(plan.services.some((s) => s.features[k])).toBe(true);
    expect(plan.deployments.filter((d) => d.service).length).toBe(plan.services.length);
    const svc: any = serviceObject({ namespace: 'n', name: 's', features: { multiPort: true, nodePortLocal: true, sessionAffinity: true, preferClose: true } });
    expect(svc.spec).toMatchObject({ type: 'NodePort', externalTrafficPolicy: 'Local', sessionAffinity: 'ClientIP', trafficDistribution: 'PreferClose' });
    expect(svc.spec.ports.map((p: any) => p.protocol)).toEqual(['TCP', 'UDP', 'TCP']);
    const dep: any = deploymentObject(plan.deployments[0]);
    expect(dep.spec.template.spec.tolerations[0].key).toBe('kwok.x-k8s.io/node');
    expect(dep.spec.template.metadata.labels.svc).toBe(plan.deployments[0].service);
  });
});

describe('SLI', () => {
  const text = (n: Record<string, number>) => Object.entries(n).map(([le, v]) => `kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="${le}"} ${v}`).join('\n');
  test('histogram_quantile interpolates inside the bucket, from the previous bound', () => {
    const b = parseHistogram(text({ '0.25': 0, '0.5': 50, '1': 100, '+Inf': 100 }));
    expect(histogramQuantile(0.5, b)).toBeCloseTo(0.5);
    expect(histogramQuantile(0.25, b)).toBeCloseTo(0.375);
    expect(histogramQuantile(0.99, b)).toBeCloseTo(0.99);
  });
  test('label sets are summed; a rank in +Inf answers the highest finite bound; empty is NaN', () => {
    const b = parseHistogram(`${text({ '1': 1, '+Inf': 1 })}\n${text({ '1': 1, '+Inf': 3 }).replace(/IPv4/g, 'IPv6')}`);
    expect(b.get(Infinity)).toBe(4);
    expect(histogramQuantile(0.99, b)).toBe(1);
    expect(quantiles(new Map()).p99).toBeNaN();
  });
  test('increase() over a run; a restarted proxy counts from zero', () => {
    const before = parseHistogram(text({ '1': 10, '+Inf': 10 }));
    expect(increase(before, parseHistogram(text({ '1': 15, '+Inf': 17 }))).get(Infinity)).toBe(7);
    expect(increase(before, parseHistogram(text({ '1': 2, '+Inf': 2 }))).get(Infinity)).toBe(2);
  });
});

describe('expected table', () => {
  const svc = (name: string, spec: object) => ({ metadata: { namespace: 'ns', name }, spec: { clusterIP: '10.96.0.5', clusterIPs: ['10.96.0.5'], ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...spec } });
  const slice = (name: string, endpoints: any[], port = 8080) => ({ addressType: 'IPv4', metadata: { namespace: 'ns', labels: { 'kubernetes.io/service-name': name } }, ports: [{ name: 'http', port, protocol: 'TCP' }], endpoints });
  const ep = (ip: string, ready: boolean, zone?: string, terminating = false, serving = ready) => ({ addresses: [ip], conditions: { ready, serving, terminating }, ...(zone ? { hints: { forZones: [{ name: zone }] } } : {}) });

  test('ready endpoints with the slice\'s port for the service port\'s name; not-ready ones left out', () => {
    const t = expectedClusterIps([svc('a', {})], [slice('a', [ep('10.0.0.1', true), ep('10.0.0.2', false)])], { name: 'n' });
    expect(t.get('10.96.0.5:80/TCP')).toEqual(['10.0.0.1:8080']);
  });
  test('no ready endpoint: the serving terminating ones; none at all: an empty list', () => {
    const t = expectedClusterIps([svc('a', {}), { ...svc('b', {}), spec: { ...svc('b', {}).spec, clusterIP: '10.96.0.6', clusterIPs: ['10.96.0.6'] } }],
      [slice('a', [ep('10.0.0.1', false, undefined, true, true), ep('10.0.0.2', false, undefined, true, false)])], { name: 'n' });
    expect(t.get('10.96.0.5:80/TCP')).toEqual(['10.0.0.1:8080']);
    expect(t.get('10.96.0.6:80/TCP')).toEqual([]);
  });
  test('PreferClose: only the node\'s zone when every ready endpoint has hints and one is for it', () => {
    const s = svc('a', { trafficDistribution: 'PreferClose' });
    const sl = slice('a', [ep('10.0.0.1', true, 'zone-a'), ep('10.0.0.2', true, 'zone-b')]);
    expect(expectedClusterIps([s], [sl], { name: 'n', zone: 'zone-a' }).get('10.96.0.5:80/TCP')).toEqual(['10.0.0.1:8080']);
    expect(expectedClusterIps([s], [sl], { name: 'n', zone: 'zone-c' }).get('10.96.0.5:80/TCP')).toEqual(['10.0.0.1:8080', '10.0.0.2:8080']);
    expect(expectedClusterIps([s], [sl], { name: 'n' }).get('10.96.0.5:80/TCP')).toHaveLength(2);
    const partial = slice('a', [ep('10.0.0.1', true, 'zone-a'), ep('10.0.0.2', true)]);
    expect(expectedClusterIps([s], [partial], { name: 'n', zone: 'zone-a' }).get('10.96.0.5:80/TCP')).toHaveLength(2);
    expect(expectedClusterIps([svc('a', {})], [sl], { name: 'n', zone: 'zone-a' }).get('10.96.0.5:80/TCP')).toHaveLength(2);
  });
  test('headless and ExternalName Services have no entry', () => {
    const t = expectedClusterIps([svc('h', { clusterIP: 'None', clusterIPs: ['None'] }), svc('x', { type: 'ExternalName', clusterIP: undefined, clusterIPs: undefined })], [], { name: 'n' });
    expect(t.size).toBe(0);
  });
});

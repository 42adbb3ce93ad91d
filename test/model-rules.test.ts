// One test per rule of src/model: client routes (client-routes.ts), CategorizeEndpoints (topology.ts,
// with upstream's pkg/proxy/topology_test.go cases that apply to current upstream: hints always on,
// terminating endpoints always proxied), object reading (parse.ts), the service and node items
// (compute.ts), the options (options.ts) and revisions (no change, no revision).
import { clusterIpRoutes, externalRoutes, type ClassOptions, type RouteInputs } from '../src/model/client-routes';
import { computeNodeItem, nodePortAddresses } from '../src/model/compute';
import { Target, type Route, type Routes } from '../src/model/enls';
import { modelOptions, OptionError, servesLocalhostNodePorts } from '../src/model/options';
import { parseEndpointSlice, parseNode, parseService } from '../src/model/parse';
import { categorize, type PortEndpoint, type PortPolicy } from '../src/model/topology';
import { cluster, ep, node, slice, svc } from './helpers/k8s';

type Obj = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
describe('client routes (client-routes.ts)', () => {
  const r = (target: Target, masquerade = false): Route => ({ target, masquerade });
  const all = (x: Route): Routes => ({ pod: x, node: x, other: x });
  const inputs = (o: Partial<RouteInputs> = {}): RouteInputs => ({
    internalLocal: false, externalLocal: false, externallyAccessible: true, hasEndpoints: true, hasLocalEndpoints: true, ...o,
  });
  const classes = (o: Partial<ClassOptions> = {}): ClassOptions => ({ masqueradeAll: false, podClass: true, ...o });

  test('cluster IP without any endpoint: reject for every client', () => {
    expect(clusterIpRoutes(inputs({ hasEndpoints: false }), classes({ masqueradeAll: true }))).toEqual(all(r(Target.REJECT)));
  });
  test('cluster IP, internalTrafficPolicy Cluster: cluster endpoints; pods keep their source, the node and others are masqueraded', () => {
    expect(clusterIpRoutes(inputs(), classes())).toEqual({ pod: r(Target.CLUSTER), node: r(Target.CLUSTER, true), other: r(Target.CLUSTER, true) });
  });
  test('cluster IP, internalTrafficPolicy Local: this node\'s endpoints, or drop (never masqueraded) when it has none', () => {
    expect(clusterIpRoutes(inputs({ internalLocal: true }), classes()).pod).toEqual(r(Target.LOCAL));
    expect(clusterIpRoutes(inputs({ internalLocal: true, hasLocalEndpoints: false }), classes({ masqueradeAll: true }))).toEqual(all(r(Target.DROP)));
  });
  test('cluster IP with --masquerade-all: every client masqueraded', () => {
    expect(clusterIpRoutes(inputs(), classes({ masqueradeAll: true }))).toEqual(all(r(Target.CLUSTER, true)));
  });
  test('cluster IP without --cluster-cidr (no pod class): nobody masqueraded', () => {
    expect(clusterIpRoutes(inputs(), classes({ podClass: false }))).toEqual(all(r(Target.CLUSTER)));
  });
  test('external destinations without any endpoint: reject', () => {
    expect(externalRoutes(inputs({ hasEndpoints: false, externalLocal: true }), classes())).toEqual(all(r(Target.REJECT)));
  });
  test('externalTrafficPolicy Cluster: cluster endpoints, everybody masqueraded', () => {
    expect(externalRoutes(inputs(), classes({ podClass: false }))).toEqual(all(r(Target.CLUSTER, true)));
  });
  test('externalTrafficPolicy Local: outside to local endpoints unmasqueraded; pods short-circuited unmasqueraded (even with --masquerade-all), the node masqueraded', () => {
    expect(externalRoutes(inputs({ externalLocal: true }), classes({ masqueradeAll: true }))).toEqual({
      pod: r(Target.CLUSTER), node: r(Target.CLUSTER, true), other: r(Target.LOCAL),
    });
  });
  test('externalTrafficPolicy Local without a local endpoint: outside dropped, pods and the node still short-circuited', () => {
    expect(externalRoutes(inputs({ externalLocal: true, hasLocalEndpoints: false }), classes())).toEqual({
      pod: r(Target.CLUSTER), node: r(Target.CLUSTER, true), other: r(Target.DROP),
    });
  });
  test('externalTrafficPolicy Local without a pod class: pods are clients like any other', () => {
    expect(externalRoutes(inputs({ externalLocal: true, hasLocalEndpoints: false }), classes({ podClass: false })).pod).toEqual(r(Target.DROP));
    expect(externalRoutes(inputs({ externalLocal: true }), classes({ podClass: false })).pod).toEqual(r(Target.LOCAL));
  });
});

// ---------------------------------------------------------------------------------------------
describe('CategorizeEndpoints (topology.ts), upstream topology_test.go cases', () => {
  interface E { ip: string; zones?: string[]; nodes?: string[]; ready?: boolean; serving?: boolean; terminating?: boolean; local?: boolean }
  const pe = (e: E): PortEndpoint => ({
    ip: e.ip, port: 80, ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false,
    nodeName: e.local ? 'test-node' : 'other-node', zoneHints: e.zones ?? null, nodeHints: e.nodes ?? null,
  });
  const policy = (o: Partial<PortPolicy> = {}): PortPolicy => ({ internalLocal: false, externalLocal: false, externallyAccessible: false, ...o });
  interface Case { name: string; zone?: string; policy?: Partial<PortPolicy>; eps: E[]; cluster: string[] | null; local: string[] | null; hasAny?: boolean }
  const abcA = (ready6 = true): E[] => [
    { ip: '10.1.2.3', zones: ['zone-a'] }, { ip: '10.1.2.4', zones: ['zone-b'] }, { ip: '10.1.2.5', zones: ['zone-c'] }, { ip: '10.1.2.6', zones: ['zone-a'], ready: ready6 },
  ];
  const cases: Case[] = [
    { name: 'normal endpoint filtering', zone: 'zone-a', eps: abcA(), cluster: ['10.1.2.3', '10.1.2.6'], local: null },
    { name: 'hints used with no annotation or trafficDistribution (current upstream)', zone: 'zone-a', eps: abcA(), cluster: ['10.1.2.3', '10.1.2.6'], local: null },
    { name: 'externalTrafficPolicy Local: topology ignored for local endpoints', zone: 'zone-a', policy: { externalLocal: true, externallyAccessible: true },
      eps: [{ ip: '10.1.2.3', zones: ['zone-a'], local: true }, { ip: '10.1.2.4', zones: ['zone-b'], local: true }, { ip: '10.1.2.5', zones: ['zone-c'] }, { ip: '10.1.2.6', zones: ['zone-a'] }],
      cluster: ['10.1.2.3', '10.1.2.6'], local: ['10.1.2.3', '10.1.2.4'] },
    { name: 'internalTrafficPolicy Local: topology ignored for local endpoints', zone: 'zone-a', policy: { internalLocal: true, externallyAccessible: true },
      eps: [{ ip: '10.1.2.3', zones: ['zone-a'], local: true }, { ip: '10.1.2.4', zones: ['zone-b'], local: true }, { ip: '10.1.2.5', zones: ['zone-c'] }, { ip: '10.1.2.6', zones: ['zone-a'] }],
      cluster: ['10.1.2.3', '10.1.2.6'], local: ['10.1.2.3', '10.1.2.4'] },
    { name: 'empty zone label', zone: '', eps: [{ ip: '10.1.2.3', zones: ['zone-a'] }], cluster: ['10.1.2.3'], local: null },
    { name: 'node in different zone, no endpoint filtering', zone: 'zone-b', eps: [{ ip: '10.1.2.3', zones: ['zone-a'] }], cluster: ['10.1.2.3'], local: null },
    { name: 'unready endpoint', zone: 'zone-a', eps: abcA(false), cluster: ['10.1.2.3'], local: null },
    { name: 'only unready endpoints in same zone (should not filter)', zone: 'zone-a',
      eps: [{ ip: '10.1.2.3', zones: ['zone-a'], ready: false }, { ip: '10.1.2.4', zones: ['zone-b'] }, { ip: '10.1.2.5', zones: ['zone-c'] }, { ip: '10.1.2.6', zones: ['zone-a'], ready: false }],
      cluster: ['10.1.2.4', '10.1.2.5'], local: null },
    { name: 'missing hints, no filtering applied', zone: 'zone-a',
      eps: [{ ip: '10.1.2.3', zones: ['zone-a'] }, { ip: '10.1.2.4', zones: ['zone-b'] }, { ip: '10.1.2.5' }, { ip: '10.1.2.6', zones: ['zone-a'] }],
      cluster: ['10.1.2.3', '10.1.2.4', '10.1.2.5', '10.1.2.6'], local: null },
    { name: 'multiple hints per endpoint, filtering includes any endpoint with zone included', zone: 'zone-c',
      eps: [{ ip: '10.1.2.3', zones: ['zone-a', 'zone-b', 'zone-c'] }, { ip: '10.1.2.4', zones: ['zone-b', 'zone-c'] }, { ip: '10.1.2.5', zones: ['zone-b', 'zone-d'] }, { ip: '10.1.2.6', zones: ['zone-c'] }],
      cluster: ['10.1.2.3', '10.1.2.4', '10.1.2.6'], local: null },
    { name: 'conflicting topology and localness', zone: 'zone-a', policy: { externalLocal: true, externallyAccessible: true },
      eps: [{ ip: '10.0.0.0', zones: ['zone-a'], local: true }, { ip: '10.0.0.1', zones: ['zone-b'], local: true }, { ip: '10.0.0.2', zones: ['zone-a'] }, { ip: '10.0.0.3', zones: ['zone-b'] }],
      cluster: ['10.0.0.0', '10.0.0.2'], local: ['10.0.0.0', '10.0.0.1'] },
    { name: 'node hints win over zone hints', zone: 'zone-a',
      eps: [{ ip: '10.0.0.0', zones: ['zone-a'], nodes: ['test-node'] }, { ip: '10.0.0.1', zones: ['zone-a'], nodes: ['n2'] }],
      cluster: ['10.0.0.0'], local: null },
    { name: 'internalTrafficPolicy Local, with empty endpoints', policy: { internalLocal: true }, eps: [], cluster: null, local: [], hasAny: false },
    { name: 'internalTrafficPolicy Local, but all endpoints are remote', policy: { internalLocal: true }, eps: [{ ip: '10.0.0.0' }, { ip: '10.0.0.1' }], cluster: null, local: [], hasAny: true },
    { name: 'internalTrafficPolicy Local, all endpoints are local', policy: { internalLocal: true }, eps: [{ ip: '10.0.0.0', local: true }, { ip: '10.0.0.1', local: true }], cluster: null, local: ['10.0.0.0', '10.0.0.1'] },
    { name: 'internalTrafficPolicy Local, some endpoints are local', policy: { internalLocal: true }, eps: [{ ip: '10.0.0.0', local: true }, { ip: '10.0.0.1' }], cluster: null, local: ['10.0.0.0'] },
    { name: 'Cluster traffic policy, endpoints not Ready', eps: [{ ip: '10.0.0.0', ready: false }, { ip: '10.0.0.1', ready: false }], cluster: [], local: null, hasAny: false },
    { name: 'Cluster traffic policy, some endpoints are Ready', eps: [{ ip: '10.0.0.0', ready: false }, { ip: '10.0.0.1' }], cluster: ['10.0.0.1'], local: null },
    { name: 'Cluster traffic policy, all endpoints are terminating', eps: [{ ip: '10.0.0.0', ready: false, serving: true, terminating: true, local: true }, { ip: '10.0.0.1', ready: false, serving: true, terminating: true }], cluster: ['10.0.0.0', '10.0.0.1'], local: null },
    { name: 'iTP Local, eTP Cluster, some endpoints local', policy: { internalLocal: true, externallyAccessible: true }, eps: [{ ip: '10.0.0.0', local: true }, { ip: '10.0.0.1' }], cluster: ['10.0.0.0', '10.0.0.1'], local: ['10.0.0.0'] },
    { name: 'iTP Cluster, eTP Local, some endpoints local', policy: { externalLocal: true, externallyAccessible: true }, eps: [{ ip: '10.0.0.0', local: true }, { ip: '10.0.0.1' }], cluster: ['10.0.0.0', '10.0.0.1'], local: ['10.0.0.0'] },
    { name: 'iTP Local, eTP Local, all endpoints remote', policy: { internalLocal: true, externalLocal: true, externallyAccessible: true }, eps: [{ ip: '10.0.0.0' }, { ip: '10.0.0.1' }], cluster: ['10.0.0.0', '10.0.0.1'], local: [] },
    { name: 'iTP Local, eTP Local, all endpoints remote and terminating', policy: { internalLocal: true, externalLocal: true, externallyAccessible: true },
      eps: [{ ip: '10.0.0.0', ready: false, serving: true, terminating: true }, { ip: '10.0.0.1', ready: false, serving: true, terminating: true }], cluster: ['10.0.0.0', '10.0.0.1'], local: [], hasAny: true },
    { name: 'iTP Cluster, eTP Local, with terminating endpoints', policy: { externalLocal: true, externallyAccessible: true },
      eps: [{ ip: '10.0.0.0' }, { ip: '10.0.0.1', ready: false, serving: false, local: true }, { ip: '10.0.0.2', ready: false, serving: true, terminating: true, local: true }, { ip: '10.0.0.3', ready: false, serving: true, terminating: true }],
      cluster: ['10.0.0.0'], local: ['10.0.0.2'] },
    { name: 'externalTrafficPolicy ignored if not externally accessible', policy: { externalLocal: true }, eps: [{ ip: '10.0.0.0' }, { ip: '10.0.0.1', local: true }], cluster: ['10.0.0.0', '10.0.0.1'], local: null },
    { name: 'no cluster endpoints for iTP Local internal-only service', policy: { internalLocal: true }, eps: [{ ip: '10.0.0.0' }, { ip: '10.0.0.1', local: true }], cluster: null, local: ['10.0.0.1'] },
  ];
  test.each(cases)('$name', (c) => {
    const got = categorize(c.eps.map(pe), policy(c.policy), { name: 'test-node', zone: c.zone ?? '' });
    const ips = (l: PortEndpoint[]) => l.map((e) => e.ip).sort();
    // null = "does not use this kind" (kpng: empty list); [] = uses it and has none.
    expect(ips(got.cluster)).toEqual(c.cluster ?? []);
    expect(ips(got.local)).toEqual(c.local ?? []);
    const expectedAny = c.hasAny ?? (new Set([...(c.cluster ?? []), ...(c.local ?? [])]).size > 0);
    expect(got.hasAny).toBe(expectedAny);
  });
});

// ---------------------------------------------------------------------------------------------
describe('reading objects (parse.ts)', () => {
  const sliceOf = (endpoints: Obj[], family = 'IPv4') => {
    const r = parseEndpointSlice(slice('s-1', 's', endpoints, { family }));
    if (!r.ok) throw new Error(r.reason);
    return r.value.slice;
  };

  test('conditions: ready unset reads as true', () => {
    expect(sliceOf([{ addresses: ['10.0.0.1'], conditions: {} }]).endpoints.at(0)).toMatchObject({ ready: true });
  });
  test('conditions: serving unset reads as true (a terminating endpoint is then used as fallback)', () => {
    expect(sliceOf([{ addresses: ['10.0.0.1'], conditions: { ready: false, terminating: true } }]).endpoints.at(0)).toMatchObject({ serving: true, terminating: true });
    const c = cluster('n1', [svc('web'), slice('web-1', 'web', [{ addresses: ['10.0.0.1'], conditions: { ready: false, terminating: true } }])]);
    expect(c.state.get('svc/default/web')!.service!.ports[0].clusterEndpoints.toArray()).toEqual([{ ip: '10.0.0.1', port: 8080, local: false, terminating: true }]);
  });
  test('conditions: terminating unset reads as false', () => {
    expect(sliceOf([{ addresses: ['10.0.0.1'] }]).endpoints.at(0)).toMatchObject({ terminating: false });
  });
  test('IPv4 with leading zeros reads as decimal (netutils.ParseIPSloppy), in services, endpoints and source ranges', () => {
    const s = parseService(svc('web', { clusterIPs: ['010.096.000.010'], externalIPs: ['192.168.099.011'], sourceRanges: ['010.000.000.000/8'], type: 'LoadBalancer' }));
    expect(s.ok && s.value).toMatchObject({ clusterIPs: ['10.96.0.10'], externalIPs: ['192.168.99.11'], loadBalancerSourceRanges: ['10.0.0.0/8'] });
    expect(sliceOf([ep('010.180.000.001')]).endpoints.at(0).ip).toBe('10.180.0.1');
  });
  test('IPv6 in canonical form, so two spellings are one endpoint', () => {
    expect(sliceOf([ep('2001:DB8:0::1')], 'IPv6').endpoints.at(0).ip).toBe('2001:db8::1');
  });
  test('slice ports match a service port by name AND protocol', () => {
    const c = cluster('n1', [
      svc('dns', { ports: [{ name: 'dns', protocol: 'UDP', port: 53 }, { name: 'dns-tcp', protocol: 'TCP', port: 53 }] }),
      slice('dns-1', 'dns', [ep('10.0.0.1')], { ports: [{ name: 'dns', protocol: 'TCP', port: 5353 }, { name: 'dns-tcp', protocol: 'TCP', port: 5354 }] }),
    ]);
    const ports = c.state.get('svc/default/dns')!.service!.ports;
    // "dns" exists in the slice only as TCP: the UDP service port has no endpoint.
    expect(ports.map((p) => [p.port.name, p.clusterEndpoints.map((e) => e.port), p.clusterIp.other.target])).toEqual([
      ['dns', [], Target.REJECT],
      ['dns-tcp', [5354], Target.CLUSTER],
    ]);
  });
  test('primary node address per family: first InternalIP of the family, else first ExternalIP', () => {
    const n = parseNode(node('n1', 'z', { addresses: [
      { type: 'ExternalIP', address: '1.1.1.1' }, { type: 'InternalIP', address: '10.0.0.5' }, { type: 'InternalIP', address: '10.0.0.6' },
      { type: 'ExternalIP', address: '2001:db8::9' }, { type: 'Hostname', address: 'n1' },
    ] }));
    expect(n.ok && n.value).toMatchObject({ primary: ['10.0.0.5', '2001:db8::9'], addresses: ['1.1.1.1', '10.0.0.5', '10.0.0.6', '2001:db8::9'] });
  });
  test('ClientIP affinity without a timeout gets 10800 s', () => {
    const s = parseService(svc('web', { extraSpec: { sessionAffinity: 'ClientIP' } }));
    expect(s.ok && s.value.affinityTimeout).toBe(10800);
    const c = cluster('n1', [svc('web', { extraSpec: { sessionAffinity: 'ClientIP' } })]);
    expect(c.state.get('svc/default/web')!.service!.sessionAffinity).toEqual({ timeoutSeconds: 10800 });
  });
  test('load-balancer ingress with ipMode Proxy is not a load-balancer IP here', () => {
    const raw = svc('web', { type: 'LoadBalancer' });
    raw.status = { loadBalancer: { ingress: [{ ip: '1.2.3.4', ipMode: 'Proxy' }, { ip: '5.6.7.8', ipMode: 'VIP' }, { hostname: 'lb.example' }] } };
    const s = parseService(raw);
    expect(s.ok && s.value.loadBalancerIPs).toEqual(['5.6.7.8']);
  });
  test('headless and ExternalName services are not proxied, quietly', () => {
    for (const raw of [svc('h', { clusterIPs: ['None'] }), svc('x', { type: 'ExternalName' })]) {
      const r = parseService(raw);
      expect(r.ok === false && r.quiet).toBe(true);
    }
  });
  // Upstream reads spec.externalIPs and spec.loadBalancerSourceRanges entry by entry and skips the
  // invalid ones (pkg/proxy/util MapIPsByIPFamily / MapCIDRsByIPFamily: "ExternalIPs may not be
  // validated by the API server"): one bad entry must not take every port of the service down.
  test('one invalid external IP or source range is skipped with a warning; the service keeps working (as upstream)', () => {
    const c = cluster('n1', [svc('web', { type: 'LoadBalancer', externalIPs: ['', '192.168.99.11'], sourceRanges: ['not-a-cidr', '203.0.113.0/25'] }), slice('web-1', 'web', [ep('10.0.0.1')])]);
    const s = c.state.get('svc/default/web')?.service;
    expect(s?.externalIps.v4).toEqual(['192.168.99.11']);
    expect(s?.loadBalancerSourceRanges).toEqual(['203.0.113.0/25']);
    expect(c.warnings).toEqual(['warn: Service default/web: ignored spec.externalIPs[0] "" is not an IP address; spec.loadBalancerSourceRanges[0] "not-a-cidr" is not a CIDR']);
  });
});

// ---------------------------------------------------------------------------------------------
describe('the service and node items (compute.ts)', () => {
  const withNode = (objs: Obj[], nodeIP = '192.168.0.2', model = modelOptions({})) => cluster('n1', [
    node('n1', 'zone-a', { addresses: [{ type: 'InternalIP', address: nodeIP }, { type: 'InternalIP', address: '2001:db8::2' }] }), ...objs,
  ], { model });
  const item = (c: ReturnType<typeof cluster>, name = 'web') => c.state.get(`svc/default/${name}`)!.service!;

  test('allowed LB sources: the ranges per family; the LB IPs join them when a range holds the node\'s primary IP', () => {
    const objs = (ranges: string[]) => [svc('web', { type: 'LoadBalancer', clusterIPs: ['10.96.0.1', 'fd00::1'], lbIPs: ['1.2.3.4', '2001:db8:1b::4'], sourceRanges: ranges }), slice('web-1', 'web', [ep('10.0.0.1')])];
    expect(item(withNode(objs(['203.0.113.0/25']))).loadBalancerAllowedSources).toEqual({ v4: ['203.0.113.0/25'], v6: [] });
    expect(item(withNode(objs(['192.168.0.0/24', '203.0.113.0/25', '2001:db8:ffff::/48']))).loadBalancerAllowedSources).toEqual({
      v4: ['1.2.3.4/32', '192.168.0.0/24', '203.0.113.0/25'], v6: ['2001:db8:ffff::/48'],
    });
    expect(item(withNode(objs(['2001:db8::/64']))).loadBalancerAllowedSources).toEqual({ v4: [], v6: ['2001:db8:1b::4/128', '2001:db8::/64'] });
  });
  test('the LB firewall applies only with ranges of the family and some endpoint', () => {
    const objs = (eps: Obj[]) => [svc('web', { type: 'LoadBalancer', lbIPs: ['1.2.3.4'], sourceRanges: ['203.0.113.0/25'] }), slice('web-1', 'web', eps)];
    expect(item(withNode(objs([ep('10.0.0.1')]))).ports[0].loadBalancerFirewall).toBe(true);
    expect(item(withNode(objs([]))).ports[0].loadBalancerFirewall).toBe(false);
  });
  test('hasEndpoints is per family: a dual-stack service with only IPv6 endpoints rejects on IPv4', () => {
    const c = withNode([svc('web', { clusterIPs: ['10.96.0.1', 'fd00::1'] }), slice('web-6', 'web', [ep('fd00:10::1')], { family: 'IPv6' })]);
    expect(item(c).ports.map((p) => [p.family, p.clusterIp.pod.target])).toEqual([[1, Target.REJECT], [2, Target.CLUSTER]]);
  });
  test('node-port addresses: default the primary IP per family, CIDRs as given, a family without any gets all', () => {
    expect(nodePortAddresses(modelOptions({}), ['192.168.0.2', '2001:db8::2'])).toEqual({ v4: ['192.168.0.2/32'], v6: ['2001:db8::2/128'] });
    expect(nodePortAddresses(modelOptions({}), ['192.168.0.2'])).toEqual({ v4: ['192.168.0.2/32'], v6: ['::/0'] });
    expect(nodePortAddresses(modelOptions({ nodePortAddresses: ['192.168.1.0/24'] }), ['192.168.0.2'])).toEqual({ v4: ['192.168.1.0/24'], v6: ['::/0'] });
    expect(nodePortAddresses(modelOptions({ nodePortAddresses: ['0.0.0.0/0'] }), [])).toEqual({ v4: ['0.0.0.0/0'], v6: ['::/0'] });
    // Through the node item.
    expect(withNode([]).state.get('node')!.node!.nodePortAddresses).toEqual({ v4: ['192.168.0.2/32'], v6: ['2001:db8::2/128'] });
  });
  test('pod CIDRs of the node item come from --cluster-cidr, split by family', () => {
    const c = withNode([], undefined, modelOptions({ clusterCIDRs: ['fd00:10::/64', '10.0.0.0/8'] }));
    expect(c.state.get('node')!.node!.podCidrs).toEqual({ v4: ['10.0.0.0/8'], v6: ['fd00:10::/64'] });
  });
  test('externalTrafficPolicy applies only to externally reachable services (ClusterIP with external IPs is)', () => {
    const eps = [ep('10.0.0.1', { node: 'n2' })];
    const plain = withNode([svc('web', { etp: 'Local' }), slice('web-1', 'web', eps)]);
    expect(item(plain).externalTrafficPolicy).toBe('Cluster');
    expect(item(plain).ports[0].localEndpoints.toArray()).toEqual([]);
    const ext = withNode([svc('web', { etp: 'Local', externalIPs: ['192.168.99.11'] }), slice('web-1', 'web', eps)]);
    expect(item(ext).externalTrafficPolicy).toBe('Local');
    expect(item(ext).ports[0].externalIp!.other.target).toBe(Target.DROP);
  });
  test('routes per destination: external IP, LB IP and node port only when the service has them', () => {
    const c = withNode([svc('web', { type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), slice('web-1', 'web', [ep('10.0.0.1')])]);
    const p = item(c).ports[0];
    expect([p.externalIp, p.loadBalancerIp, p.nodePort?.other]).toEqual([null, null, { target: Target.CLUSTER, masquerade: true }]);
  });
});

// ---------------------------------------------------------------------------------------------
describe('options (options.ts)', () => {
  test('defaults: no pod class, no --masquerade-all, node ports on the primary IPs', () => {
    expect(modelOptions({})).toEqual({
      detectLocalMode: 'ClusterCIDR', clusterCIDRs: [], podBridgeInterface: '', podInterfaceNamePrefix: '',
      masqueradeAll: false, nodePortAddresses: ['primary'], bindAddress: '', localhostNodePorts: false,
    });
  });
  test('CIDRs are canonical and de-duplicated; a bad one names its flag', () => {
    expect(modelOptions({ clusterCIDRs: [' 10.0.0.0/8', '10.0.0.0/8', 'FD00::/64'] }).clusterCIDRs).toEqual(['10.0.0.0/8', 'fd00::/64']);
    expect(() => modelOptions({ clusterCIDRs: ['10.0.0.0'] })).toThrow(OptionError);
    expect(() => modelOptions({ clusterCIDRs: ['10.0.0.0'] })).toThrow(/--cluster-cidr/);
    expect(() => modelOptions({ nodePortAddresses: ['300.0.0.0/8'] })).toThrow(/--nodeport-addresses/);
    // As upstream: keywords and CIDRs combine (src/model/options.test.ts has the rest).
    expect(modelOptions({ nodePortAddresses: ['primary', '10.0.0.0/8'] }).nodePortAddresses).toEqual(['primary', '10.0.0.0/8']);
  });
  test('localhost node ports in the ENLS exactly when the settings set route_localnet for them', () => {
    const v6Node = { name: 'n1', zone: '', addresses: ['fd00::1'], primary: ['fd00::1'], podCIDRs: [] };
    const v4Node = { ...v6Node, addresses: ['10.1.0.1'], primary: ['10.1.0.1'] };
    for (const [list, spec] of [[['primary'], v6Node], [['primary'], v4Node], [['all'], v6Node], [[], v4Node], [['localhost'], v4Node], [['10.0.0.0/8'], v4Node], [['96.0.0.0/3'], v4Node]] as const) {
      const opts = modelOptions({ nodePortAddresses: [...list], localhostNodePorts: true });
      const enls = computeNodeItem('n1', spec, opts).node!.localhostNodePorts === true;
      expect([list, spec.primary[0], enls]).toEqual([list, spec.primary[0], servesLocalhostNodePorts(opts)]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
describe('revisions: only real changes propagate', () => {
  const base = () => cluster('n1', [
    node('n1', 'zone-a'),
    svc('web', { itp: 'Local' }),
    slice('web-1', 'web', [ep('10.0.0.1', { node: 'n1' }), ep('10.0.0.2', { node: 'n2' }), ep('10.0.0.3', { node: 'n3' })]),
  ]);

  test('re-applying the same objects, or reordering a slice\'s endpoints, makes no revision', () => {
    const c = base();
    const rev = c.state.revision;
    c.add(svc('web', { itp: 'Local' }));
    c.add(slice('web-1', 'web', [ep('10.0.0.3', { node: 'n3' }), ep('10.0.0.1', { node: 'n1' }), ep('10.0.0.2', { node: 'n2' })]));
    expect(c.state.revision).toBe(rev);
  });
  test('a change this node does not use makes no revision (a remote endpoint flapping under internalTrafficPolicy Local)', () => {
    const c = base();
    const rev = c.state.revision;
    c.add(slice('web-1', 'web', [ep('10.0.0.1', { node: 'n1' }), ep('10.0.0.2', { node: 'n2', ready: false }), ep('10.0.0.3', { node: 'n3' })]));
    expect(c.state.revision).toBe(rev);
    // ...but a change of this node's endpoints does.
    c.add(slice('web-1', 'web', [ep('10.0.0.9', { node: 'n1' }), ep('10.0.0.2', { node: 'n2' }), ep('10.0.0.3', { node: 'n3' })]));
    expect(c.state.revision).toBe(rev + 1);
  });
});

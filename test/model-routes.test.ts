// The routes view for every kube-proxy rule the ENLS applies.
import { cluster, ep, node, routesOf, slice, svc } from './helpers/k8s';
import { Target } from '../src/model/enls';

const one = (c: ReturnType<typeof cluster>, service = 'default/web') => {
  const rows = routesOf(c.routes(), service);
  expect(rows).toHaveLength(1);
  return rows[0];
};

describe('endpoint readiness', () => {
  test('only ready endpoints receive traffic', () => {
    const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1', { ready: true }), ep('10.244.1.2', { ready: false })])]);
    expect(one(c)).toEqual({ service: 'default/web', protocol: 'TCP', port: 80, internal: ['10.244.1.1:8080'], external: [] });
  });

  test('conditions left unset read as ready (and serving), not terminating', () => {
    const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1'), ep('10.244.1.2', { terminating: true, ready: false })])]);
    expect(one(c).internal).toEqual(['10.244.1.1:8080']);
  });

  test('serving+terminating endpoints are used only when none is ready anywhere', () => {
    const eps = [
      ep('10.244.1.1', { ready: false, serving: true, terminating: true }),
      ep('10.244.1.2', { ready: false, serving: false, terminating: true }),
    ];
    const c = cluster('n1', [svc('web'), slice('web-1', 'web', eps)]);
    expect(one(c).internal).toEqual(['10.244.1.1:8080']);
    c.add(slice('web-1', 'web', [...eps, ep('10.244.1.3', { ready: true })]));
    expect(one(c).internal).toEqual(['10.244.1.3:8080']);
  });

  test('no endpoints at all: empty lists, rejected (has_endpoints false)', () => {
    const c = cluster('n1', [svc('web')]);
    expect(one(c).internal).toEqual([]);
    expect(c.state.get('svc/default/web')!.service!.ports[0].clusterIp.other.target).toBe(Target.REJECT);
  });
});

describe('traffic policies', () => {
  const eps = [ep('10.244.1.1', { node: 'n1' }), ep('10.244.2.1', { node: 'n2' })];

  test('internalTrafficPolicy Local: cluster IP traffic only to this node\'s endpoints', () => {
    const c = cluster('n1', [svc('web', { itp: 'Local' }), slice('web-1', 'web', eps)]);
    expect(one(c).internal).toEqual(['10.244.1.1:8080']);
  });

  test('internalTrafficPolicy Local without a local endpoint: empty, dropped (has_endpoints true)', () => {
    const c = cluster('n3', [svc('web', { itp: 'Local' }), slice('web-1', 'web', eps)]);
    expect(one(c).internal).toEqual([]);
    expect(c.state.get('svc/default/web')!.service!.ports[0].clusterIp.other.target).toBe(Target.DROP);
  });

  test('externalTrafficPolicy Local: external traffic local only, internal to all', () => {
    const c = cluster('n1', [svc('web', { type: 'NodePort', etp: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), slice('web-1', 'web', eps)]);
    expect(one(c)).toMatchObject({ internal: ['10.244.1.1:8080', '10.244.2.1:8080'], external: ['10.244.1.1:8080'] });
  });

  test('externalTrafficPolicy Local on a node without local endpoints: external empty', () => {
    const c = cluster('n9', [svc('web', { type: 'LoadBalancer', etp: 'Local', lbIPs: ['192.168.60.1'] }), slice('web-1', 'web', eps)]);
    expect(one(c)).toMatchObject({ internal: ['10.244.1.1:8080', '10.244.2.1:8080'], external: [] });
  });

  test('local serving+terminating fallback is separate from the cluster-wide one', () => {
    const local = [
      ep('10.244.1.1', { node: 'n1', ready: false, serving: true, terminating: true }),
      ep('10.244.2.1', { node: 'n2', ready: true }),
    ];
    const c = cluster('n1', [svc('web', { type: 'NodePort', etp: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), slice('web-1', 'web', local)]);
    // Cluster-wide a ready endpoint exists; locally only a terminating one, which is used.
    expect(one(c)).toMatchObject({ internal: ['10.244.2.1:8080'], external: ['10.244.1.1:8080'] });
    const item = c.state.get('svc/default/web')!.service!.ports[0];
    expect(item.localEndpoints.at(0)).toMatchObject({ local: true, terminating: true });
  });

  test('both policies Local', () => {
    const c = cluster('n2', [svc('web', { type: 'NodePort', etp: 'Local', itp: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), slice('web-1', 'web', eps)]);
    expect(one(c)).toMatchObject({ internal: ['10.244.2.1:8080'], external: ['10.244.2.1:8080'] });
  });
});

describe('external traffic', () => {
  const s = slice('web-1', 'web', [ep('10.244.1.1')]);
  test.each([
    ['ClusterIP without external IPs', svc('web'), []],
    ['ClusterIP with externalIPs', svc('web', { externalIPs: ['192.168.70.1'] }), ['10.244.1.1:8080']],
    ['NodePort', svc('web', { type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), ['10.244.1.1:8080']],
    ['LoadBalancer', svc('web', { type: 'LoadBalancer', lbIPs: ['192.168.60.1'] }), ['10.244.1.1:8080']],
  ])('%s', (_name, service, external) => {
    expect(one(cluster('n1', [service, s])).external).toEqual(external);
  });

  test('load-balancer IPs, source ranges and affinity land in the ENLS', () => {
    const c = cluster('n1', [svc('web', { type: 'LoadBalancer', lbIPs: ['192.168.60.1'], sourceRanges: ['192.168.50.0/24', ' 10.0.0.0/8'], affinity: 300 }), s]);
    const service = c.state.get('svc/default/web')!.service!;
    expect(service.loadBalancerIps.v4).toEqual(['192.168.60.1']);
    expect(service.loadBalancerSourceRanges).toEqual(['10.0.0.0/8', '192.168.50.0/24']);
    expect(service.sessionAffinity).toEqual({ timeoutSeconds: 300 });
  });
});

describe('topology (upstream pkg/proxy/topology.go: hints are used whenever every ready endpoint has them)', () => {
  // What the EndpointSlice controller writes for PreferClose / PreferSameZone / topology-mode Auto: zone hints.
  const zoneHinted = [
    ep('10.244.1.1', { node: 'n1', zones: ['zone-a'] }),
    ep('10.244.2.1', { node: 'n2', zones: ['zone-b'] }),
    ep('10.244.3.1', { node: 'n3', zones: ['zone-a'] }),
  ];
  // For PreferSameNode: node and zone hints.
  const nodeHinted = [
    ep('10.244.1.1', { node: 'n1', zones: ['zone-a'], nodes: ['n1'] }),
    ep('10.244.2.1', { node: 'n2', zones: ['zone-b'], nodes: ['n2'] }),
    ep('10.244.3.1', { node: 'n3', zones: ['zone-a'], nodes: ['n3'] }),
  ];
  const objs = (service: Record<string, unknown>, eps = zoneHinted) => [node('n1', 'zone-a'), service, slice('web-1', 'web', eps)];

  test.each(['PreferClose', 'PreferSameZone'])('trafficDistribution %s keeps the node\'s zone', (td) => {
    expect(one(cluster('n1', objs(svc('web', { trafficDistribution: td })))).internal).toEqual(['10.244.1.1:8080', '10.244.3.1:8080']);
  });

  test('node hints keep this node\'s endpoints (PreferSameNode)', () => {
    expect(one(cluster('n1', objs(svc('web', { trafficDistribution: 'PreferSameNode' }), nodeHinted))).internal).toEqual(['10.244.1.1:8080']);
  });

  test('node hints that name no endpoint of this node fall back to zone hints', () => {
    const eps = nodeHinted.map((e, i) => ({ ...e, hints: { forZones: [{ name: i === 1 ? 'zone-b' : 'zone-a' }], forNodes: [{ name: 'n7' }] } }));
    expect(one(cluster('n1', objs(svc('web', { trafficDistribution: 'PreferSameNode' }), eps))).internal).toEqual(['10.244.1.1:8080', '10.244.3.1:8080']);
  });

  test('the topology-mode annotation Auto: hints used', () => {
    expect(one(cluster('n1', objs(svc('web', { annotations: { 'service.kubernetes.io/topology-mode': 'Auto' } })))).internal).toEqual(['10.244.1.1:8080', '10.244.3.1:8080']);
  });

  test('without trafficDistribution or annotation, hints are still used (upstream parity)', () => {
    expect(one(cluster('n1', objs(svc('web')))).internal).toEqual(['10.244.1.1:8080', '10.244.3.1:8080']);
    expect(one(cluster('n1', objs(svc('web'), nodeHinted))).internal).toEqual(['10.244.1.1:8080']);
  });

  test('hints are ignored unless every ready endpoint carries them', () => {
    const eps = [...zoneHinted, ep('10.244.4.1', { node: 'n4' })];
    expect(one(cluster('n1', objs(svc('web', { trafficDistribution: 'PreferClose' }), eps))).internal).toHaveLength(4);
  });

  test('hints are ignored when this node\'s zone is not among them, or the node has no zone', () => {
    const c = cluster('n1', [node('n1', 'zone-z'), svc('web', { trafficDistribution: 'PreferClose' }), slice('web-1', 'web', zoneHinted)]);
    expect(one(c).internal).toHaveLength(3);
    const d = cluster('n1', [node('n1'), svc('web'), slice('web-1', 'web', zoneHinted)]);
    expect(one(d).internal).toHaveLength(3);
  });

  test('a zone change of this node re-filters every service', () => {
    const c = cluster('n1', objs(svc('web', { trafficDistribution: 'PreferClose' })));
    c.add(node('n1', 'zone-b'));
    expect(one(c).internal).toEqual(['10.244.2.1:8080']);
  });

  test('local endpoints (Local policy) ignore topology', () => {
    const c = cluster('n2', [node('n2', 'zone-b'), svc('web', { type: 'NodePort', etp: 'Local', trafficDistribution: 'PreferClose', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), slice('web-1', 'web', nodeHinted)]);
    expect(one(c)).toMatchObject({ internal: ['10.244.2.1:8080'], external: ['10.244.2.1:8080'] });
  });
});

describe('ports and slices', () => {
  test('named target ports resolve per EndpointSlice', () => {
    const c = cluster('n1', [
      svc('web'),
      slice('web-a', 'web', [ep('10.244.1.1')], { ports: [{ name: 'http', protocol: 'TCP', port: 8080 }] }),
      slice('web-b', 'web', [ep('10.244.1.2')], { ports: [{ name: 'http', protocol: 'TCP', port: 9090 }] }),
    ]);
    expect(one(c).internal).toEqual(['10.244.1.1:8080', '10.244.1.2:9090']);
  });

  test('each service port takes its own slice port', () => {
    const c = cluster('n1', [
      svc('web', { ports: [{ name: 'http', port: 80 }, { name: 'metrics', port: 9100 }] }),
      slice('web-a', 'web', [ep('10.244.1.1')], { ports: [{ name: 'http', port: 8080 }, { name: 'metrics', port: 9101 }] }),
    ]);
    expect(c.routes().map((r) => [r.port, r.internal])).toEqual([[80, ['10.244.1.1:8080']], [9100, ['10.244.1.1:9101']]]);
  });

  test('endpoints are de-duplicated across slices', () => {
    const c = cluster('n1', [svc('web'), slice('web-a', 'web', [ep('10.244.1.1'), ep('10.244.1.2')]), slice('web-b', 'web', [ep('10.244.1.1')])]);
    expect(one(c).internal).toEqual(['10.244.1.1:8080', '10.244.1.2:8080']);
  });

  test('deleting a slice removes its endpoints; a slice moving to another service moves them', () => {
    const c = cluster('n1', [svc('web'), svc('api', { clusterIPs: ['10.96.0.2'] }), slice('s1', 'web', [ep('10.244.1.1')])]);
    c.add(slice('s1', 'api', [ep('10.244.1.1')]));
    expect(one(c).internal).toEqual([]);
    expect(one(c, 'default/api').internal).toEqual(['10.244.1.1:8080']);
    c.del(slice('s1', 'api', []));
    expect(one(c, 'default/api').internal).toEqual([]);
  });
});

describe('services that are not proxied', () => {
  test.each([
    ['headless', svc('web', { clusterIPs: ['None'] })],
    ['ExternalName', { ...svc('web'), spec: { type: 'ExternalName', externalName: 'example.org' } }],
    ['another proxy\'s service', svc('web', { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } })],
  ])('%s: no routes, no warning', (_n, s) => {
    const c = cluster('n1', [s, slice('web-1', 'web', [ep('10.244.1.1')])]);
    expect(c.routes()).toEqual([]);
    expect(c.warnings).toEqual([]);
  });

  test('a service labelled with this proxy\'s name is proxied', () => {
    const c = cluster('n1', [svc('web', { labels: { 'service.kubernetes.io/service-proxy-name': 'kpng' } }), slice('web-1', 'web', [ep('10.244.1.1')])], { serviceProxyName: 'kpng' });
    expect(one(c).internal).toEqual(['10.244.1.1:8080']);
  });
});

describe('dual-stack', () => {
  const v4 = slice('web-v4', 'web', [ep('10.244.1.1')]);
  const v6 = slice('web-v6', 'web', [ep('FD00:10:244:1:0:0:0:1')], { family: 'IPv6' });

  test('IPv6 endpoints print as [addr]:port, canonical', () => {
    const c = cluster('n1', [svc('web', { clusterIPs: ['10.96.0.1', 'fd00:10:96::1'] }), v4, v6]);
    expect(one(c).internal).toEqual(['10.244.1.1:8080', '[fd00:10:244:1::1]:8080']);
    expect(c.state.get('svc/default/web')!.service!.clusterIps).toEqual({ v4: ['10.96.0.1'], v6: ['fd00:10:96::1'] });
  });

  test('a single-stack service ignores the other family\'s endpoints', () => {
    expect(one(cluster('n1', [svc('web'), v4, v6])).internal).toEqual(['10.244.1.1:8080']);
    expect(one(cluster('n1', [svc('web', { clusterIPs: ['fd00:10:96::1'] }), v4, v6])).internal).toEqual(['[fd00:10:244:1::1]:8080']);
  });
});

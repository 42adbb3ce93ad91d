// The model's decisions for --detect-local-mode, --bind-address and --nodeport-addresses keywords:
// what the node item carries for backends and how the service items' routes follow (as kube-proxy's
// getLocalDetectors, detectNodeIPs and expandNodePortAddressKeywords + NewNodePortAddresses decide).
import { Target } from './enls';
import { modelOptions, type RawModelOptions } from './options';
import { cluster, ep, node, slice, svc } from '../../test/helpers/k8s';

type Obj = Record<string, unknown>;

const NODE_V4 = '192.168.0.2', NODE_V6 = '2001:db8::2';
const thisNode = (podCIDRs?: string[]): Obj => ({
  ...node('n1', 'zone-a', { addresses: [{ type: 'InternalIP', address: NODE_V4 }, { type: 'InternalIP', address: NODE_V6 }] }),
  ...(podCIDRs ? { spec: { podCIDRs } } : {}),
});
// A dual-stack NodePort service, externalTrafficPolicy Local, whose endpoints are all on another node.
const elsewhere: Obj[] = [
  svc('web', { type: 'NodePort', etp: 'Local', clusterIPs: ['10.96.0.1', 'fd00::1'], ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
  slice('web-4', 'web', [ep('10.244.2.5', { node: 'n2' })]),
  slice('web-6', 'web', [ep('fd00:244:2::5', { node: 'n2' })], { family: 'IPv6' }),
];
const world = (raw: RawModelOptions, objs: Obj[] = [thisNode(), ...elsewhere]) => cluster('n1', objs, { model: modelOptions(raw) });
const nodeItem = (c: ReturnType<typeof cluster>) => c.state.get('node')!.node!;
/** Per family (v4, v6): whether pods are told apart in the routes (cluster IP "other" masqueraded, node port pods short-circuited). */
const podClass = (c: ReturnType<typeof cluster>) => c.state.get('svc/default/web')!.service!.ports.map((p) => ({
  clusterOtherMasq: p.clusterIp.other.masquerade, podNodePort: p.nodePort!.pod.target, otherNodePort: p.nodePort!.other.target,
}));
const TOLD_APART = { clusterOtherMasq: true, podNodePort: Target.CLUSTER, otherNodePort: Target.DROP };
const ALIKE = { clusterOtherMasq: false, podNodePort: Target.DROP, otherNodePort: Target.DROP };

describe('local traffic detection', () => {
  test('ClusterCIDR: the cluster CIDR of each family; a family without one has no pod class (kube-proxy\'s no-op detector)', () => {
    const c = world({ clusterCIDRs: ['10.244.0.0/16'] });
    expect(nodeItem(c)).toMatchObject({ podCidrs: { v4: ['10.244.0.0/16'], v6: [] }, podBridgeInterface: '', podInterfaceNamePrefix: '' });
    expect(podClass(c)).toEqual([TOLD_APART, ALIKE]);
    expect(podClass(world({}))).toEqual([ALIKE, ALIKE]);
  });
  test('NodeCIDR: the first podCIDR of each family of this node\'s Node object, not --cluster-cidr', () => {
    const c = world({ detectLocalMode: 'NodeCIDR', clusterCIDRs: ['10.0.0.0/8'] }, [thisNode(['10.244.1.0/24', 'fd00:244:1::/64', '10.245.1.0/24']), ...elsewhere]);
    expect(nodeItem(c).podCidrs).toEqual({ v4: ['10.244.1.0/24'], v6: ['fd00:244:1::/64'] });
    expect(podClass(c)).toEqual([TOLD_APART, TOLD_APART]);
    expect(c.warnings).toEqual([]);
  });
  test('NodeCIDR before the Node has podCIDRs: none in the node item (pods match nothing), said once; they are taken when they come', async () => {
    const c = world({ detectLocalMode: 'NodeCIDR' });
    expect(nodeItem(c).podCidrs).toEqual({ v4: [], v6: [] });
    await new Promise((r) => setImmediate(r)); // the node state hears that the store is synced
    expect(c.warnings).toEqual([expect.stringMatching(/^warn: node n1: --detect-local-mode NodeCIDR, but its Node object has no spec.podCIDRs/)]);
    c.add({ ...thisNode(), metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'zone-b' } } });
    expect(c.warnings).toHaveLength(1);
    c.add(thisNode(['10.244.1.0/24']));
    expect(nodeItem(c).podCidrs).toEqual({ v4: ['10.244.1.0/24'], v6: [] });
    // The service items do not depend on them: pods are a class in both families all along.
    expect(podClass(c)).toEqual([TOLD_APART, TOLD_APART]);
  });
  test('BridgeInterface and InterfaceNamePrefix: the interface in the node item, pods a class in both families, no CIDR', () => {
    const bridge = world({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0', clusterCIDRs: ['10.0.0.0/8'] });
    expect(nodeItem(bridge)).toMatchObject({ podCidrs: { v4: [], v6: [] }, podBridgeInterface: 'cni0', podInterfaceNamePrefix: '' });
    expect(podClass(bridge)).toEqual([TOLD_APART, TOLD_APART]);
    const prefix = world({ detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth' });
    expect(nodeItem(prefix)).toMatchObject({ podCidrs: { v4: [], v6: [] }, podBridgeInterface: '', podInterfaceNamePrefix: 'veth' });
    expect(podClass(prefix)).toEqual([TOLD_APART, TOLD_APART]);
  });
});

describe('--bind-address and --nodeport-addresses', () => {
  const npa = (raw: RawModelOptions, objs?: Obj[]) => nodeItem(world(raw, objs)).nodePortAddresses;

  test('primary: the Node\'s primary address per family; --bind-address replaces the one of its family', () => {
    expect(npa({})).toEqual({ v4: ['192.168.0.2/32'], v6: ['2001:db8::2/128'] });
    expect(npa({ bindAddress: '192.168.0.9' })).toEqual({ v4: ['192.168.0.9/32'], v6: ['2001:db8::2/128'] });
    expect(npa({ bindAddress: '2001:db8::9' })).toEqual({ v4: ['192.168.0.2/32'], v6: ['2001:db8::9/128'] });
    expect(npa({ bindAddress: '0.0.0.0' })).toEqual({ v4: ['192.168.0.2/32'], v6: ['2001:db8::2/128'] });
    // No Node object: the bind address alone; the other family, unknown, answers everywhere.
    expect(npa({ bindAddress: '192.168.0.9' }, [])).toEqual({ v4: ['192.168.0.9/32'], v6: ['::/0'] });
    // A loopback primary address pins nothing (kube-proxy skips it): that family answers everywhere.
    expect(npa({ bindAddress: '127.0.0.1' })).toEqual({ v4: ['0.0.0.0/0'], v6: ['2001:db8::2/128'] });
  });
  test('--bind-address is the node\'s address for source ranges too', () => {
    const objs = [thisNode(), svc('lb', { type: 'LoadBalancer', lbIPs: ['1.2.3.4'], sourceRanges: ['192.168.7.0/24'] }), slice('lb-1', 'lb', [ep('10.244.2.5')])];
    const allowed = (raw: RawModelOptions) => world(raw, objs).state.get('svc/default/lb')!.service!.loadBalancerAllowedSources.v4;
    expect(allowed({})).toEqual(['192.168.7.0/24']);
    expect(allowed({ bindAddress: '192.168.7.1' })).toEqual(['1.2.3.4/32', '192.168.7.0/24']);
  });
  test('keywords and CIDRs combine per family; a /0 makes the rest moot; loopback CIDRs stay (backends serve none there)', () => {
    expect(npa({ nodePortAddresses: ['primary', '10.1.0.0/16'] })).toEqual({ v4: ['10.1.0.0/16', '192.168.0.2/32'], v6: ['2001:db8::2/128'] });
    expect(npa({ nodePortAddresses: ['all'] })).toEqual({ v4: ['0.0.0.0/0'], v6: ['::/0'] });
    expect(npa({ nodePortAddresses: ['primary', 'all', '10.1.0.0/16'] })).toEqual({ v4: ['0.0.0.0/0'], v6: ['::/0'] });
    expect(npa({ nodePortAddresses: ['localhost'] })).toEqual({ v4: ['127.0.0.0/8'], v6: ['::1/128'] });
    expect(npa({ nodePortAddresses: ['localhost', 'primary'] })).toEqual({ v4: ['127.0.0.0/8', '192.168.0.2/32'], v6: ['2001:db8::2/128', '::1/128'] });
    expect(npa({ nodePortAddresses: ['10.1.0.0/16'] })).toEqual({ v4: ['10.1.0.0/16'], v6: ['::/0'] });
  });
});

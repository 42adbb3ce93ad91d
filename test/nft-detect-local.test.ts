// Packet flows through the nft backend's rules for the interface-based local traffic detection modes
// and node-port addresses on loopback, without root (test/helpers/nft-tracer.ts). The real-kernel
// version of the same decisions: test/e2e/nft-detect-local.test.ts.
import { stmtText } from '../src/backend/nft/text';
import { ep, node, slice, svc } from './helpers/k8s';
import { nftWorld, type WorldOptions } from './helpers/nft-world';

type Obj = Record<string, unknown>;

const NODE_IP = '192.168.0.2';
const POD = '10.0.0.2';
const OUTSIDE = '203.0.113.2';
const objs: Obj[] = [
  node('n1', 'zone-a', { addresses: [{ type: 'InternalIP', address: NODE_IP }] }),
  // externalTrafficPolicy Local with its only endpoint on another node: pods (and the node) are sent
  // to the cluster endpoints, outside clients dropped.
  svc('web', { type: 'NodePort', etp: 'Local', clusterIPs: ['172.30.0.41'], ports: [{ name: 'p80', protocol: 'TCP', port: 80, nodePort: 3001 }] }),
  slice('web-1', 'web', [ep('10.180.2.1', { node: 'n2' })], { ports: [{ name: 'p80', protocol: 'TCP', port: 80 }] }),
];
const world = (o: WorldOptions) => nftWorld(objs, o);

describe('interface-based pod detection', () => {
  test('BridgeInterface: packets in on the bridge are pods, whatever their source; other interfaces are not', () => {
    const w = world({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0' });
    const to = (iif: string, src = POD, dst = NODE_IP, dport = 3001) => w.flow({ src, dst, dport, iif, srcIsLocal: false });
    expect(to('cni0')).toBe('DNAT 10.180.2.1:80');
    expect(to('cni0', OUTSIDE)).toBe('DNAT 10.180.2.1:80');
    expect(to('cni01')).toBe('DROP');
    expect(to('eth0')).toBe('DROP');
    // Cluster IP: pods keep their source; anything else is masqueraded (kube-proxy's "iifname != cni0" rule).
    expect(to('cni0', POD, '172.30.0.41', 80)).toBe('DNAT 10.180.2.1:80');
    expect(to('eth0', OUTSIDE, '172.30.0.41', 80)).toBe('DNAT 10.180.2.1:80 masq');
    // The node's own connections have no incoming interface: the node class.
    expect(w.flow({ src: NODE_IP, dst: '172.30.0.41', dport: 80 })).toBe('DNAT 10.180.2.1:80 masq');
    expect(w.flow({ src: NODE_IP, dst: NODE_IP, dport: 3001 })).toBe('DNAT 10.180.2.1:80 masq');
  });
  test('InterfaceNamePrefix: every interface whose name starts with the prefix', () => {
    const w = world({ detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth' });
    const to = (iif: string) => w.flow({ src: POD, dst: NODE_IP, dport: 3001, iif, srcIsLocal: false });
    expect(to('veth1a2b')).toBe('DNAT 10.180.2.1:80');
    expect(to('veth')).toBe('DNAT 10.180.2.1:80');
    expect(to('vet')).toBe('DROP');
    expect(to('eth0')).toBe('DROP');
  });
  test('the rules say iifname where ClusterCIDR says saddr', () => {
    const rules = (o: WorldOptions) => [...world(o).nft.tables.ip.chains.values()].flatMap((c) => c.rules.map((r) => stmtText('ip', r))).join('\n');
    expect(rules({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0' })).toMatch(/iifname "cni0" goto /);
    expect(rules({ detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth' })).toMatch(/iifname "veth\*" goto /);
    expect(rules({ clusterCIDRs: ['10.0.0.0/8'] })).not.toMatch(/iifname/);
  });
});

describe('node ports on loopback addresses', () => {
  test('never served, not even with localhost or a /0 (as kube-proxy\'s nftables mode by default)', () => {
    for (const nodePortAddresses of [['localhost'], ['all'], ['primary', 'localhost'], ['96.0.0.0/3']]) {
      expect(world({ nodePortAddresses }).flow({ src: '127.0.0.1', dst: '127.0.0.1', dport: 3001 })).toBe('ACCEPT');
    }
  });
  test('localhost alone: no node port in that family at all; with primary: the primary address answers', () => {
    expect(world({ nodePortAddresses: ['localhost'] }).flow({ src: NODE_IP, dst: NODE_IP, dport: 3001 })).toBe('ACCEPT');
    expect(world({ nodePortAddresses: ['localhost', 'primary'] }).flow({ src: NODE_IP, dst: NODE_IP, dport: 3001 })).toBe('DNAT 10.180.2.1:80 masq');
  });
  test('--bind-address moves the primary node-port address', () => {
    const w = world({ bindAddress: '192.168.0.9' });
    const from = (dst: string) => w.flow({ src: OUTSIDE, dst, dport: 3001, srcIsLocal: false, dstIsLocal: true });
    expect(from('192.168.0.9')).toBe('DROP'); // answered: etp Local, no local endpoint, outside client
    expect(from(NODE_IP)).toBe('ACCEPT');
  });
});

// The socket LB's plan for node ports: entries on the node's addresses where node ports answer.
import { IPFamily, Protocol, Target, normalizeItem, type NodeInfo, type Route, type Service } from '../../model/enls';
import { decodeBackend, decodeSvcKey, decodeSvcValue, FLAG_REFUSE } from './maps';
import { nodePortAddrs, planEntries, planService, serviceEntries, serviceEntriesAtMost, type Ids } from './plan';

const r = (target: Target): Route => ({ target, masquerade: false });
const node = (addresses: string[], v4: string[], v6: string[] = ['::/0']): NodeInfo =>
  ({ name: 'n1', zone: '', addresses, podBridgeInterface: '', podInterfaceNamePrefix: '', podCidrs: { v4: [], v6: [] }, nodePortAddresses: { v4, v6 } });

function svc(nodePortPod: Target): Service {
  const eps = [{ ip: '10.244.1.2', port: 8080, local: true, terminating: false }];
  return normalizeItem({
    key: 'svc/ns/web',
    service: {
      namespace: 'ns', name: 'web', type: 'NodePort', clusterIps: { v4: ['10.96.0.1'], v6: [] },
      ports: [{
        port: { name: 'p', protocol: Protocol.TCP, port: 80, nodePort: 30080 }, family: IPFamily.IPV4, clusterEndpoints: eps, localEndpoints: eps,
        clusterIp: { pod: r(Target.CLUSTER), node: r(Target.CLUSTER), other: r(Target.CLUSTER) },
        nodePort: { pod: r(nodePortPod), node: r(nodePortPod), other: r(Target.DROP) },
      }],
    },
  }).service!;
}

let next = 1;
const ids: Ids = { backend: () => next++, service: () => next++ };
/** "addr:port" -> count (slot 0 entries), or -1 when refused. */
const heads = (s: Service, n?: NodeInfo) => {
  const out = new Map<string, number>();
  for (const [k, v] of planEntries(planService(s, ids, n)).heads) {
    const key = decodeSvcKey(Buffer.from(k, 'latin1'));
    expect(key.slot).toBe(0);
    const val = decodeSvcValue(Buffer.from(v, 'latin1'));
    out.set(`${key.addr}:${key.port}`, val.flags & FLAG_REFUSE ? -1 : val.count);
  }
  return out;
};

describe('ebpf plan: node ports', () => {
  test('the node\'s addresses inside the node-port CIDRs, per family', () => {
    const n = node(['192.168.50.1', '10.0.0.5', 'fd00::1'], ['192.168.50.0/24']);
    expect(nodePortAddrs(n, IPFamily.IPV4)).toEqual(['192.168.50.1']);
    expect(nodePortAddrs(n, IPFamily.IPV6)).toEqual(['fd00::1']);
    expect(nodePortAddrs(node(['192.168.50.1', '10.0.0.5'], ['0.0.0.0/0']), IPFamily.IPV4)).toEqual(['192.168.50.1', '10.0.0.5']);
    expect(nodePortAddrs(undefined, IPFamily.IPV4)).toEqual([]);
  });

  test('the cheap bound of a service\'s entries is never below the exact count (the capacity check relies on it)', () => {
    const n = node(['192.168.50.1', '10.0.0.5', 'fd00::5'], ['0.0.0.0/0']);
    for (const t of [Target.CLUSTER, Target.LOCAL, Target.REJECT, Target.DROP]) {
      for (const nd of [n, undefined]) {
        const s = svc(t);
        expect(serviceEntriesAtMost(s, nd)).toBeGreaterThanOrEqual(serviceEntries(s, nd));
        // As many entries as planService writes.
        expect(serviceEntries(s, nd)).toBe(planService(s, ids, nd).entries);
      }
    }
    expect(serviceEntriesAtMost(svc(Target.CLUSTER), n)).toBe(4 * 2); // 4 addresses x (slot 0 + 1 backend)
  });

  test('a node port is balanced on each node address, by the pod class route', () => {
    const n = node(['192.168.50.1', '10.0.0.5'], ['0.0.0.0/0']);
    expect(heads(svc(Target.CLUSTER), n)).toEqual(new Map([['10.96.0.1:80', 1], ['192.168.50.1:30080', 1], ['10.0.0.5:30080', 1]]));
    // Refused for the pod class: refused at connect() (not left to the DROP of other hosts' traffic).
    expect(heads(svc(Target.REJECT), n).get('192.168.50.1:30080')).toBe(-1);
    // Without a node item the node's addresses are unknown: no node-port entries.
    expect(heads(svc(Target.CLUSTER))).toEqual(new Map([['10.96.0.1:80', 1]]));
  });
});

describe('ebpf plan: endpoint lists', () => {
  test('endpoints of the other family are left out of a port\'s backends', () => {
    const mixed = [{ ip: '10.244.1.2', port: 8080, local: true, terminating: false }, { ip: 'fd00::2', port: 8080, local: true, terminating: false }];
    const s = normalizeItem({
      key: 'svc/ns/mixed',
      service: {
        namespace: 'ns', name: 'mixed', type: 'ClusterIP', clusterIps: { v4: ['10.96.0.7'], v6: [] },
        ports: [{ port: { name: 'p', protocol: Protocol.TCP, port: 80, nodePort: 0 }, family: IPFamily.IPV4, clusterEndpoints: mixed, localEndpoints: mixed, clusterIp: { pod: r(Target.CLUSTER), node: r(Target.CLUSTER), other: r(Target.CLUSTER) } }],
      },
    }).service!;
    const plan = planService(s, ids);
    expect(plan.backends).toBe(1);
    expect([...planEntries(plan).backends.values()].map((v) => decodeBackend(Buffer.from(v, 'latin1')).addr)).toEqual(['10.244.1.2']);
  });
});

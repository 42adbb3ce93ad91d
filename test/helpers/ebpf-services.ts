// Services of many shapes for the socket LB's planning tests: both families, several ports, external
// and load-balancer IPs, node ports, every pod-class target, affinity, empty lists, endpoints with
// their own ports, and a node whose addresses answer node ports.
import { IPFamily, Protocol, Target, normalizeItem, type Endpoint, type NodeInfo, type Service } from '../../src/model/enls';

export const node: NodeInfo = {
  name: 'n1', zone: '', addresses: ['192.168.50.1', '10.0.0.5', 'fd00::5'], podBridgeInterface: '', podInterfaceNamePrefix: '',
  podCidrs: { v4: [], v6: [] }, nodePortAddresses: { v4: ['0.0.0.0/0'], v6: ['::/0'] },
};

const TARGETS = [Target.CLUSTER, Target.LOCAL, Target.REJECT, Target.DROP, Target.TARGET_UNSPECIFIED];
const route = (t: Target) => ({ pod: { target: t, masquerade: false }, node: { target: t, masquerade: true }, other: { target: Target.DROP, masquerade: false } });

/** Service i of a varied set (the same i gives the same service; no two of the first 5,200 share an address). */
export function variedService(i: number): Service {
  const v6 = i % 5 === 3;
  const hex = (n: number) => `${(n >> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  const addr = (k: number) => (v6 ? `fd00:244::${hex(i * 16 + k)}` : `10.244.${(i >> 6) & 255}.${((i & 63) << 2) + k}`);
  const n = i % 7 === 0 ? 0 : 1 + (i % 4);
  const eps: Endpoint[] = Array.from({ length: n }, (_, k) => ({ ip: addr(k), port: i % 6 === 5 ? 8080 + k : 8080, local: k % 2 === 0, terminating: false }));
  const fam = v6 ? IPFamily.IPV6 : IPFamily.IPV4;
  const ips = (base: string, count: number) => Array.from({ length: count }, (_, k) => (v6 ? `fd00:${base}::${hex(i * 4 + k + 1)}` : `10.${base}.${(i >> 7) & 255}.${((i & 127) << 1) + k}`));
  const set = (list: string[]) => (v6 ? { v4: [], v6: list } : { v4: list, v6: [] });
  const ports = Array.from({ length: 1 + (i % 3 === 0 ? 1 : 0) }, (_, p) => ({
    port: { name: `p${p}`, protocol: [Protocol.TCP, Protocol.UDP, Protocol.SCTP][(i + p) % 3]!, port: 80 + p, nodePort: i % 4 === 1 ? 30000 + 2 * ((i >> 2) % 1300) + p : 0 },
    family: fam, clusterEndpoints: eps, localEndpoints: eps.filter((e) => e.local),
    clusterIp: route(TARGETS[(i + p) % 4]!),
    ...(i % 8 === 2 ? { externalIp: route(TARGETS[(i >> 3) % 5]!) } : {}),
    ...(i % 9 === 4 ? { loadBalancerIp: route(Target.LOCAL) } : {}),
    ...(i % 4 === 1 ? { nodePort: route(TARGETS[(i >> 2) % 4]!) } : {}),
  }));
  return normalizeItem({
    key: `svc/ns/s${i}`,
    service: {
      namespace: 'ns', name: `s${i}`, type: 'ClusterIP', clusterIps: set(ips('96', 1)),
      externalIps: set(i % 8 === 2 ? ips('97', 2) : []), loadBalancerIps: set(i % 9 === 4 ? ips('98', 1) : []),
      sessionAffinity: i % 10 === 6 ? { timeoutSeconds: 300 + i } : null, ports,
    },
  }).service!;
}

export const variedServices = (count: number, from = 0): Service[] => Array.from({ length: count }, (_, k) => variedService(from + k));

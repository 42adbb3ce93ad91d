// The local cluster's plan: its addresses, names and paths, and the configuration files of its nodes,
// computed in one place so that hack/cluster/up.sh, down.sh and the tests agree on them.
//
//   node dist/hack/cluster/plan.js env [--nodes N] [--family F] [--state DIR]
//                                                                      shell assignments (eval them)
//   node dist/hack/cluster/plan.js kubeconfigs [--state DIR]           write admin/controller-manager/scheduler kubeconfigs
//   node dist/hack/cluster/plan.js node-files NAME [--nodes N] [--family F] [--state DIR]
//                                                                      write that node's config files
//   node dist/hack/cluster/plan.js kwok-nodes --count N [--from K]    kwok's fake nodes K..K+N-1, a v1 List
//                                                                      (JSON, for kubectl create -f -)
//
// Addresses: the control plane listens on the host side of a bridge (kc-br0, 172.30.0.1); node i has
// network namespace kc-node<i> wired to it at 172.30.0.(10+i) and pod CIDR 10.244.<i>.0/24; services are
// 10.96.0.0/16 (the `kubernetes` Service is 10.96.0.1). kwok's fake nodes (up.sh --kwok-nodes N) exist in
// the API only: kwok-node-<i> has pod CIDR 10.128.0.0 + 64 (i-1) /26 and InternalIP 10.127.0.0 + i, and
// nothing routes either.
//
// IP families (--family, up.sh --family): ipv4 (the default, as above), ipv6 or dual (IPv4 primary).
// IPv6 mirrors IPv4: the bridge is fd00:30::1/64, node i fd00:30::(10+i) (the same digits), its pod
// CIDR fd00:244:<i>::/64 (gateway ::1) of the cluster CIDR fd00:244::/32; services fd00:96::/112 (the
// API server takes an IPv6 service CIDR of at most 20 bits), the `kubernetes` Service fd00:96::1 and
// the cluster DNS fd00:96::a. A family the cluster lacks has no address anywhere (an ipv6 cluster has
// no IPv4 address on its bridge or nodes). Dual: every list is IPv4 first, and the single-address
// settings (the API server's address, the kubernetes Service, the kubelet's clusterDNS) are IPv4's.
import * as fs from 'node:fs';
import * as path from 'node:path';

export type IPFamily = 'ipv4' | 'ipv6' | 'dual';
export const IP_FAMILIES: readonly IPFamily[] = ['ipv4', 'ipv6', 'dual'];
type Single = 'ipv4' | 'ipv6';

/** The single families of a cluster's family, the primary first (dual: IPv4, then IPv6). */
export function familiesOf(family: IPFamily): Single[] {
  if (family === 'ipv4') return ['ipv4'];
  if (family === 'ipv6') return ['ipv6'];
  if (family === 'dual') return ['ipv4', 'ipv6'];
  throw new Error(`family: ${String(family)} is not one of ${IP_FAMILIES.join(', ')}`);
}

/** Each family's addresses: the whole plan is these, picked per family. */
const ADDRESSES = {
  ipv4: {
    bridgeIP: '172.30.0.1', prefixLength: 24, nodeIP: (i: number) => `172.30.0.${10 + i}`,
    podCIDR: (i: number) => `10.244.${i}.0/24`, podGateway: (i: number) => `10.244.${i}.1`,
    clusterCIDR: '10.244.0.0/16', serviceCIDR: '10.96.0.0/16', kubernetesServiceIP: '10.96.0.1', clusterDNS: '10.96.0.10',
    anyAddress: '0.0.0.0/0',
  },
  ipv6: {
    bridgeIP: 'fd00:30::1', prefixLength: 64, nodeIP: (i: number) => `fd00:30::${10 + i}`,
    podCIDR: (i: number) => `fd00:244:${i}::/64`, podGateway: (i: number) => `fd00:244:${i}::1`,
    clusterCIDR: 'fd00:244::/32', serviceCIDR: 'fd00:96::/112', kubernetesServiceIP: 'fd00:96::1', clusterDNS: 'fd00:96::a',
    anyAddress: '::/0',
  },
} as const;

export interface NodePlan {
  name: string;
  /** Its network namespace (ip netns) and the host end of its veth. */
  netns: string;
  hostVeth: string;
  /** The node's address of the primary family (its InternalIP the API server reaches it by). */
  ip: string;
  /** Its addresses on the bridge, one per family, the primary first (the kubelet's --node-ip). */
  ips: string[];
  podCIDR: string;
  /** Its pod CIDRs, one per family, the primary first (the Node's spec.podCIDRs). */
  podCIDRs: string[];
  /** The pod bridge's (gateway's) address inside the node. */
  podGateway: string;
  podGateways: string[];
  /** The node's cgroup under every v1 hierarchy: kubelet's cgroupRoot; its daemons sit in <root>/system. */
  cgroupRoot: string;
  /** Everything the node writes: kubelet's root, containerd's root and state, CNI, logs. */
  dir: string;
  /** Its topology.kubernetes.io/zone label (realNodeZone). */
  zone: string;
}

export interface ClusterPlan {
  family: IPFamily;
  state: string;
  bridge: string;
  /** The host's address on the bridge of the primary family (the API server's). */
  bridgeIP: string;
  prefixLength: number;
  /** The host's addresses on the bridge, one per family, as ADDRESS/PREFIX. */
  bridgeAddresses: string[];
  apiServer: string;
  apiServerPort: number;
  /**
   * The API server's DNS name, as kubeadm's controlPlaneEndpoint gives one: in its certificate, and
   * resolved on every node by the node's own /etc/hosts (never by the cluster's DNS).
   */
  apiServerName: string;
  /** The API server's and controller-manager's --service-cluster-ip-range (dual: both, comma-separated). */
  serviceCIDR: string;
  serviceCIDRs: string[];
  kubernetesServiceIP: string;
  /** The controller-manager's and the proxies' --cluster-cidr (dual: both, comma-separated). */
  clusterCIDR: string;
  clusterCIDRs: string[];
  /** The kubelet's clusterDNS (the primary family's kube-dns address). */
  clusterDNS: string;
  /** The kube-dns Service's clusterIPs (dual: both families). */
  clusterDNSIPs: string[];
  clusterDomain: string;
  nodes: NodePlan[];
}

export const MAX_NODES = 9;

/** The zones of topology.kubernetes.io/zone, round-robin over the real nodes and over the kwok nodes. */
export const ZONES = ['zone-a', 'zone-b', 'zone-c'] as const;

/** The zone of real node i (kc-node<i>, i from 1): zone-a, zone-b, zone-c, zone-a, ... */
export function realNodeZone(i: number): string {
  if (!Number.isInteger(i) || i < 1) throw new Error(`node index: ${i} is not a whole number from 1`);
  return ZONES[(i - 1) % ZONES.length];
}

export function clusterPlan(nodeCount = 2, state = '/var/lib/kpng-cluster', family: IPFamily = 'ipv4'): ClusterPlan {
  const fams = familiesOf(family).map((f) => ADDRESSES[f]);
  const primary = fams[0];
  if (!Number.isInteger(nodeCount) || nodeCount < 1 || nodeCount > MAX_NODES) {
    throw new Error(`nodes: ${nodeCount} is not a whole number from 1 to ${MAX_NODES}`);
  }
  if (!path.isAbsolute(state)) throw new Error(`state: ${state} is not an absolute path`);
  const nodes: NodePlan[] = [];
  for (let i = 1; i <= nodeCount; i++) {
    const name = `kc-node${i}`;
    nodes.push({
      name,
      netns: name,
      hostVeth: `kc-veth${i}`,
      ip: primary.nodeIP(i),
      ips: fams.map((f) => f.nodeIP(i)),
      podCIDR: primary.podCIDR(i),
      podCIDRs: fams.map((f) => f.podCIDR(i)),
      podGateway: primary.podGateway(i),
      podGateways: fams.map((f) => f.podGateway(i)),
      cgroupRoot: `/${name}`,
      dir: path.join(state, 'nodes', name),
      zone: realNodeZone(i),
    });
  }
  return {
    family,
    state,
    bridge: 'kc-br0',
    bridgeIP: primary.bridgeIP,
    prefixLength: primary.prefixLength,
    bridgeAddresses: fams.map((f) => `${f.bridgeIP}/${f.prefixLength}`),
    apiServer: `https://${hostPort(primary.bridgeIP)}:6443`,
    apiServerPort: 6443,
    apiServerName: 'api.kpng-cluster.test',
    serviceCIDR: fams.map((f) => f.serviceCIDR).join(','),
    serviceCIDRs: fams.map((f) => f.serviceCIDR),
    kubernetesServiceIP: primary.kubernetesServiceIP,
    clusterCIDR: fams.map((f) => f.clusterCIDR).join(','),
    clusterCIDRs: fams.map((f) => f.clusterCIDR),
    clusterDNS: primary.clusterDNS,
    clusterDNSIPs: fams.map((f) => f.clusterDNS),
    clusterDomain: 'cluster.local',
    nodes,
  };
}

/** An address as the host part of a URL: IPv6 in brackets. */
export function hostPort(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

/** The family of an address or CIDR. */
export function familyOfAddress(a: string): Single {
  return a.includes(':') ? 'ipv6' : 'ipv4';
}

/**
 * The routes a node needs to the other nodes' pods (no overlay: every node is on one bridge), one per
 * family of each other node, through that node's address of the family.
 */
export function podRoutes(plan: ClusterPlan, node: NodePlan): { cidr: string; via: string }[] {
  return plan.nodes.filter((n) => n.name !== node.name).flatMap((n) => n.podCIDRs.map((cidr, k) => ({ cidr, via: n.ips[k] })));
}

/** The host's routes to every node's pods (its own traffic: e2e.test and kubectl reach pods by them). */
export function hostRoutes(plan: ClusterPlan): { cidr: string; via: string }[] {
  return plan.nodes.flatMap((n) => n.podCIDRs.map((cidr, k) => ({ cidr, via: n.ips[k] })));
}

/** A node's default routes, one per family, through the host's address on the bridge. */
export function nodeGateways(plan: ClusterPlan): string[] {
  return plan.bridgeAddresses.map((a) => a.split('/')[0]);
}

/**
 * The sysctls of a node's network namespace (they go with it): forwarding for each family (the node
 * routes its pods), no reverse-path filter, and the bridge's traffic through netfilter for both
 * families (service traffic between two pods of one node's bridge).
 */
export function nodeSysctls(plan: ClusterPlan): string[] {
  const fams = familiesOf(plan.family);
  const out: string[] = [];
  if (fams.includes('ipv4')) out.push('net.ipv4.ip_forward=1');
  out.push('net.ipv4.conf.all.rp_filter=0', 'net.bridge.bridge-nf-call-iptables=1', 'net.bridge.bridge-nf-call-ip6tables=1');
  if (fams.includes('ipv6')) out.push('net.ipv6.conf.all.disable_ipv6=0', 'net.ipv6.conf.all.forwarding=1');
  return out;
}

/**
 * The sysctls of the host's end (the bridge kc-br0): IPv6 on it, no router advertisements taken from
 * it and no duplicate address detection (every address on it is the plan's). They belong to the
 * bridge and go with it: the host's own settings (forwarding included) are never changed, since the
 * host routes nothing for the cluster: its routes to pod CIDRs carry its own traffic only, and nodes
 * reach each other's pods over the bridge directly.
 */
export function bridgeSysctls(plan: ClusterPlan): string[] {
  if (!familiesOf(plan.family).includes('ipv6')) return [];
  const b = plan.bridge;
  return [`net.ipv6.conf.${b}.disable_ipv6=0`, `net.ipv6.conf.${b}.accept_ra=0`, `net.ipv6.conf.${b}.accept_dad=0`];
}

/** The API server certificate's IP addresses: the host's on the bridge and the `kubernetes` Service's. */
export function apiServerCertIPs(plan: ClusterPlan): string[] {
  const fams = familiesOf(plan.family).map((f) => ADDRESSES[f]);
  return [...fams.map((f) => f.bridgeIP), ...fams.map((f) => f.kubernetesServiceIP)];
}

/** The kubelet's serving address: the node's own (dual: every address of the node, ::). */
export function kubeletAddress(plan: ClusterPlan, node: NodePlan): string {
  return plan.family === 'dual' ? '::' : node.ip;
}

/** The kube-dns Service's ipFamilyPolicy: dual-stack on a dual-stack cluster. */
export function dnsFamilyPolicy(plan: ClusterPlan): string {
  return plan.family === 'dual' ? 'RequireDualStack' : 'SingleStack';
}

/**
 * A KubeProxyConfiguration (config.conf) for the cluster: its clusterCIDR set to the plan's (dual: both
 * families). On an IPv6 cluster, the health and metrics servers' 0.0.0.0 (the base's) becomes [::]: the
 * address kube-proxy's own defaults give a cluster whose bindAddress is IPv6 (kube-proxy and kpng
 * listen on both families for 0.0.0.0 anyway, unless the kernel has no IPv6).
 */
export function proxyConfig(configText: string, plan: ClusterPlan): string {
  let out = /^clusterCIDR:.*$/m.test(configText)
    ? configText.replace(/^clusterCIDR:.*$/m, `clusterCIDR: ${plan.clusterCIDR}`)
    : `${configText.replace(/\n*$/, '\n')}clusterCIDR: ${plan.clusterCIDR}\n`;
  if (plan.family === 'ipv6') out = out.replace(/^((?:healthz|metrics)BindAddress:\s*)0\.0\.0\.0:/gm, '$1"[::]:').replace(/^((?:healthz|metrics)BindAddress:\s*"\[::\]:\d+)\s*$/gm, '$1"');
  return out;
}

export function kubeletConfig(plan: ClusterPlan, node: NodePlan, caFile: string): string {
  // JSON is YAML: no YAML writer needed, and the field names stay exactly as the kubelet reads them.
  const config = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: kubeletAddress(plan, node),
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: caFile } },
    authorization: { mode: 'Webhook' },
    // The host has cgroup v1 controllers only (v2 holds none): cgroupfs under a root of the node's own.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: node.cgroupRoot,
    containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
    clusterDNS: [plan.clusterDNS],
    clusterDomain: plan.clusterDomain,
    resolvConf: '/etc/resolv.conf',
    volumePluginDir: path.join(node.dir, 'volume-plugins'),
    failSwapOn: false,
    // cAdvisor cannot read this machine's root device: no eviction, no image GC on disk figures it lacks.
    evictionHard: { 'memory.available': '0%', 'nodefs.available': '0%', 'imagefs.available': '0%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    localStorageCapacityIsolation: false,
    serializeImagePulls: false,
    // The images are imported, never pulled: nothing to wait for.
    runtimeRequestTimeout: '2m',
    nodeStatusUpdateFrequency: '5s',
    syncFrequency: '10s',
    maxPods: 110,
    podPidsLimit: -1,
    protectKernelDefaults: false,
    makeIPTablesUtilChains: false,
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

export function containerdConfig(node: NodePlan, pauseImage: string, runc = '/usr/sbin/runc', cniBin = '/usr/lib/cni'): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    'version = 3',
    `root = ${q(path.join(node.dir, 'containerd'))}`,
    "state = '/run/containerd'",
    '[grpc]',
    "  address = '/run/containerd/containerd.sock'",
    "[plugins.'io.containerd.cri.v1.images']",
    "  snapshotter = 'overlayfs'",
    "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
    `  sandbox = ${q(pauseImage)}`,
    "[plugins.'io.containerd.cri.v1.runtime']",
    // Root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below the runtime's own.
    '  restrict_oom_score_adj = true',
    '  netns_mounts_under_state_dir = true',
    '  disable_apparmor = true',
    "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]",
    "  runtime_type = 'io.containerd.runc.v2'",
    "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]",
    `  BinaryName = ${q(runc)}`,
    '  SystemdCgroup = false',
    "[plugins.'io.containerd.cri.v1.runtime'.cni]",
    `  bin_dirs = [${q(cniBin)}]`,
    `  conf_dir = ${q(path.join(node.dir, 'cni', 'net.d'))}`,
    "[plugins.'io.containerd.grpc.v1.cri']",
    "  stream_server_address = '127.0.0.1'",
    '',
  ].join('\n');
}

/** The node's CNI network: a bridge with host-local addresses from its pod CIDRs (a range per family). */
export function cniConfig(node: NodePlan): string {
  const conf = {
    cniVersion: '1.0.0',
    name: 'kpng-cluster',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        // Traffic to a service whose endpoint is on the same bridge comes back through it (hairpin).
        hairpinMode: true,
        ipMasq: false,
        ipam: {
          type: 'host-local',
          dataDir: path.join(node.dir, 'cni', 'ipam'),
          ranges: node.podCIDRs.map((subnet, k) => [{ subnet, gateway: node.podGateways[k] }]),
          routes: node.podCIDRs.map((c) => ({ dst: ADDRESSES[familyOfAddress(c)].anyAddress })),
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
  return `${JSON.stringify(conf, null, 2)}\n`;
}

export interface KubeconfigUser {
  name: string;
  certFile?: string;
  keyFile?: string;
  tokenFile?: string;
}

export function kubeconfig(server: string, caFile: string, user: KubeconfigUser): string {
  const u: Record<string, string> = {};
  if (user.certFile) u['client-certificate'] = user.certFile;
  if (user.keyFile) u['client-key'] = user.keyFile;
  if (user.tokenFile) u.tokenFile = user.tokenFile;
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'kpng-cluster', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: user.name, user: u }],
    contexts: [{ name: 'kpng-cluster', context: { cluster: 'kpng-cluster', user: user.name } }],
    'current-context': 'kpng-cluster',
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

// kwok's fake nodes (hack/cluster/up.sh --kwok-nodes N, hack/cluster/kwok/stages.yaml): Node objects in
// the API that kwok keeps Ready (a Lease each), whose pods kwok makes Running and Ready with addresses
// from the node's pod CIDR. No kubelet, no container, no network: for benches of the control plane and
// of a proxy's view of a large cluster.

/** kwok manages the nodes carrying this annotation (its --manage-nodes-with-annotation-selector). */
export const KWOK_NODE_ANNOTATION = { key: 'kwok.x-k8s.io/node', value: 'fake' } as const;
/** Keeps every pod that does not tolerate it off the kwok nodes (the bench's pods tolerate it). */
export const KWOK_TAINT = { key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' } as const;
/** The kwok nodes' label, beside kubernetes.io/hostname, kubernetes.io/os and the zone. */
export const KWOK_NODE_LABEL = { key: 'type', value: 'kwok' } as const;
/** Pod CIDRs of the kwok nodes: a /26 each, node i at 10.128.0.0 + 64 (i - 1). */
export const KWOK_POD_CIDR = '10.128.0.0/10';
export const KWOK_NODE_POD_PREFIX = 26;
/** The kwok nodes' InternalIPs (their pods' hostIP): node i at 10.127.0.0 + i. */
export const KWOK_NODE_IP_CIDR = '10.127.0.0/16';
export const KWOK_MAX_NODES = 10_000;

function ipv4ToInt(ip: string): number {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) throw new Error(`${ip} is not an IPv4 address`);
  return ((parts[0] << 24) >>> 0) + (parts[1] << 16) + (parts[2] << 8) + parts[3];
}
function intToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

export function kwokNodeName(i: number): string {
  return `kwok-node-${i}`;
}

/** Pod CIDR of kwok node i (from 1): 10.128.0.0/26, 10.128.0.64/26, ... */
export function kwokNodePodCIDR(i: number): string {
  checkKwokIndex(i);
  const base = ipv4ToInt(KWOK_POD_CIDR.split('/')[0]);
  return `${intToIpv4(base + (i - 1) * 2 ** (32 - KWOK_NODE_POD_PREFIX))}/${KWOK_NODE_POD_PREFIX}`;
}

export function kwokNodeIP(i: number): string {
  checkKwokIndex(i);
  return intToIpv4(ipv4ToInt(KWOK_NODE_IP_CIDR.split('/')[0]) + i);
}

function checkKwokIndex(i: number): void {
  if (!Number.isInteger(i) || i < 1 || i > KWOK_MAX_NODES) {
    throw new Error(`kwok node ${i}: kwok nodes are numbered from 1 to ${KWOK_MAX_NODES} (a /${KWOK_NODE_POD_PREFIX} each of ${KWOK_POD_CIDR})`);
  }
}

/**
 * Node objects (plain JSON, v1) for kwok nodes from .. from+count-1. Their status carries their addresses
 * only (the API server keeps a Node's status on create); kwok's stages fill in the rest.
 */
export function kwokNodes(count: number, from = 1): object[] {
  if (!Number.isInteger(count) || count < 0) throw new Error(`kwok nodes: count ${count} is not a whole number >= 0`);
  if (!Number.isInteger(from) || from < 1) throw new Error(`kwok nodes: --from ${from} is not a whole number >= 1`);
  const last = from + count - 1;
  if (last > KWOK_MAX_NODES) {
    throw new Error(`kwok nodes: ${last} nodes asked for, at most ${KWOK_MAX_NODES} (a /${KWOK_NODE_POD_PREFIX} pod CIDR each of ${KWOK_POD_CIDR})`);
  }
  const nodes: object[] = [];
  for (let i = from; i <= last; i++) {
    const name = kwokNodeName(i);
    const podCIDR = kwokNodePodCIDR(i);
    nodes.push({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        labels: {
          [KWOK_NODE_LABEL.key]: KWOK_NODE_LABEL.value,
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          'topology.kubernetes.io/zone': ZONES[(i - 1) % ZONES.length],
        },
        annotations: { [KWOK_NODE_ANNOTATION.key]: KWOK_NODE_ANNOTATION.value },
      },
      spec: { podCIDR, podCIDRs: [podCIDR], taints: [{ ...KWOK_TAINT }] },
      status: {
        addresses: [
          { type: 'InternalIP', address: kwokNodeIP(i) },
          { type: 'Hostname', address: name },
        ],
      },
    });
  }
  return nodes;
}

/** Shell assignments of the plan (for `eval`): scalars, then per-node arrays indexed from 0. */
export function shellEnv(plan: ClusterPlan): string {
  const sq = (s: string | number) => `'${String(s).replace(/'/g, `'\\''`)}'`;
  const lines = [
    `state=${sq(plan.state)}`,
    `bridge=${sq(plan.bridge)}`,
    `bridge_ip=${sq(plan.bridgeIP)}`,
    `prefix_length=${sq(plan.prefixLength)}`,
    `api_server=${sq(plan.apiServer)}`,
    `api_server_port=${sq(plan.apiServerPort)}`,
    `api_server_name=${sq(plan.apiServerName)}`,
    `service_cidr=${sq(plan.serviceCIDR)}`,
    `kubernetes_service_ip=${sq(plan.kubernetesServiceIP)}`,
    `cluster_cidr=${sq(plan.clusterCIDR)}`,
    `cluster_dns=${sq(plan.clusterDNS)}`,
    `family=${sq(plan.family)}`,
    // Lists, space-separated (words for a shell loop).
    `bridge_addresses=${sq(plan.bridgeAddresses.join(' '))}`,
    `bridge_sysctls=${sq(bridgeSysctls(plan).join(' '))}`,
    `node_sysctls=${sq(nodeSysctls(plan).join(' '))}`,
    `node_gateways=${sq(nodeGateways(plan).join(' '))}`,
    `host_routes=${sq(hostRoutes(plan).map((r) => `${r.cidr}@${r.via}`).join(' '))}`,
    `api_server_cert_ips=${sq(apiServerCertIPs(plan).join(' '))}`,
    `cluster_dns_ips=${sq(plan.clusterDNSIPs.join(' '))}`,
    `dns_family_policy=${sq(dnsFamilyPolicy(plan))}`,
    `kubernetes_service_host=${sq(hostPort(plan.kubernetesServiceIP))}`,
  ];
  const arr = (name: string, pick: (n: NodePlan) => string) => `${name}=(${plan.nodes.map((n) => sq(pick(n))).join(' ')})`;
  lines.push(
    arr('node_names', (n) => n.name),
    arr('node_netns', (n) => n.netns),
    arr('node_veths', (n) => n.hostVeth),
    arr('node_ips', (n) => n.ip),
    arr('node_pod_cidrs', (n) => n.podCIDR),
    // Per node, the lists: addresses as ADDRESS/PREFIX (space-separated), the kubelet's --node-ip and
    // the Node's podCIDRs (comma-separated), routes to the other nodes' pods (CIDR@VIA, space-separated).
    arr('node_addresses', (n) => n.ips.map((ip, k) => `${ip}/${plan.bridgeAddresses[k].split('/')[1]}`).join(' ')),
    arr('node_ip_lists', (n) => n.ips.join(',')),
    arr('node_pod_cidr_lists', (n) => n.podCIDRs.join(',')),
    arr('node_routes', (n) => podRoutes(plan, n).map((r) => `${r.cidr}@${r.via}`).join(' ')),
    arr('node_cgroups', (n) => n.cgroupRoot),
    arr('node_dirs', (n) => n.dir),
    arr('node_zones', (n) => n.zone),
  );
  return `${lines.join('\n')}\n`;
}

/** The control plane's client kubeconfigs (certificates from lib/pki.sh), written into the state dir. */
export const CONTROL_PLANE_USERS = ['admin', 'controller-manager', 'scheduler'] as const;

export function writeControlPlaneKubeconfigs(plan: ClusterPlan): string[] {
  const pki = path.join(plan.state, 'pki');
  return CONTROL_PLANE_USERS.map((user) => {
    const file = path.join(plan.state, `${user}.kubeconfig`);
    const creds = { name: user, certFile: path.join(pki, `${user}.crt`), keyFile: path.join(pki, `${user}.key`) };
    fs.writeFileSync(file, kubeconfig(plan.apiServer, path.join(pki, 'ca.crt'), creds), { mode: 0o600 });
    return file;
  });
}

/** Writes one node's config files into its directory; returns their paths. */
export function writeNodeFiles(plan: ClusterPlan, name: string, pauseImage: string): string[] {
  const node = plan.nodes.find((n) => n.name === name);
  if (!node) throw new Error(`node ${name} is not in the plan (${plan.nodes.map((n) => n.name).join(', ')})`);
  const pki = path.join(plan.state, 'pki');
  const files: [string, string][] = [
    [path.join(node.dir, 'kubelet.yaml'), kubeletConfig(plan, node, path.join(pki, 'ca.crt'))],
    [path.join(node.dir, 'kubelet.kubeconfig'), kubeconfig(plan.apiServer, path.join(pki, 'ca.crt'), {
      name: `system:node:${node.name}`,
      certFile: path.join(pki, `${node.name}.crt`),
      keyFile: path.join(pki, `${node.name}.key`),
    })],
    [path.join(node.dir, 'containerd.toml'), containerdConfig(node, pauseImage)],
    [path.join(node.dir, 'cni', 'net.d', '10-kpng-cluster.conflist'), cniConfig(node)],
  ];
  for (const [file, text] of files) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
  return files.map(([f]) => f);
}

function main(argv: string[]): number {
  const [cmd, ...rest] = argv;
  let nodes = 2;
  let state = '/var/lib/kpng-cluster';
  let pause = 'registry.k8s.io/pause:3.10.2';
  let count: number | undefined;
  let from = 1;
  let family: IPFamily = 'ipv4';
  const positional: string[] = [];
  const num = (flag: string, v: string | undefined) => {
    if (v === undefined || !/^\d+$/.test(v)) throw new Error(`${flag}: ${v ?? 'no value'} is not a whole number`);
    return Number(v);
  };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (a === '--nodes') nodes = Number(rest[++i]);
    else if (a === '--state') state = rest[++i];
    else if (a === '--pause-image') pause = rest[++i];
    else if (a === '--count') count = num(a, rest[++i]);
    else if (a === '--from') from = num(a, rest[++i]);
    else if (a === '--family') family = rest[++i] as IPFamily;
    else positional.push(a);
  }
  if (cmd === 'kwok-nodes' && count !== undefined && positional.length === 0) {
    process.stdout.write(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: kwokNodes(count, from) })}\n`);
    return 0;
  }
  const plan = clusterPlan(nodes, state, family);
  if (cmd === 'env') {
    process.stdout.write(shellEnv(plan));
    return 0;
  }
  if (cmd === 'kubeconfigs') {
    writeControlPlaneKubeconfigs(plan);
    return 0;
  }
  if (cmd === 'node-files' && positional.length === 1) {
    writeNodeFiles(plan, positional[0], pause);
    return 0;
  }
  if (cmd === 'proxy-config' && positional.length === 1) {
    process.stdout.write(proxyConfig(fs.readFileSync(positional[0], 'utf8'), plan));
    return 0;
  }
  process.stderr.write('usage: plan.js env|kubeconfigs|node-files NAME|proxy-config FILE [--nodes N] [--family ipv4|ipv6|dual] [--state DIR] [--pause-image REF]\n' +
    '       plan.js kwok-nodes --count N [--from K]\n');
  return 2;
}

if (require.main === module) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`plan: ${(e as Error).message}\n`);
    process.exitCode = 2;
  }
}

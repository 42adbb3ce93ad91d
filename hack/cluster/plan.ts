// The local cluster's plan: its addresses, names and paths, and the configuration files of its nodes,
// computed in one place so that hack/cluster/up.sh, down.sh and the tests agree on them.
//
//   node dist/hack/cluster/plan.js env [--nodes N] [--state DIR]      shell assignments (eval them)
//   node dist/hack/cluster/plan.js kubeconfigs [--state DIR]           write admin/controller-manager/scheduler kubeconfigs
//   node dist/hack/cluster/plan.js node-files NAME [--nodes N] [--state DIR]
//                                                                      write that node's config files
//   node dist/hack/cluster/plan.js kwok-nodes --count N [--from K]    kwok's fake nodes K..K+N-1, a v1 List
//                                                                      (JSON, for kubectl create -f -)
//
// Addresses: the control plane listens on the host side of a bridge (kc-br0, 172.30.0.1); node i has
// network namespace kc-node<i> wired to it at 172.30.0.(10+i) and pod CIDR 10.244.<i>.0/24; services are
// 10.96.0.0/16 (the `kubernetes` Service is 10.96.0.1). kwok's fake nodes (up.sh --kwok-nodes N) exist in
// the API only: kwok-node-<i> has pod CIDR 10.128.0.0 + 64 (i-1) /26 and InternalIP 10.127.0.0 + i, and
// nothing routes either.
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface NodePlan {
  name: string;
  /** Its network namespace (ip netns) and the host end of its veth. */
  netns: string;
  hostVeth: string;
  ip: string;
  podCIDR: string;
  /** The pod bridge's (gateway's) address inside the node. */
  podGateway: string;
  /** The node's cgroup under every v1 hierarchy: kubelet's cgroupRoot; its daemons sit in <root>/system. */
  cgroupRoot: string;
  /** Everything the node writes: kubelet's root, containerd's root and state, CNI, logs. */
  dir: string;
  /** Its topology.kubernetes.io/zone label (realNodeZone). */
  zone: string;
}

export interface ClusterPlan {
  state: string;
  bridge: string;
  bridgeIP: string;
  prefixLength: number;
  apiServer: string;
  apiServerPort: number;
  /**
   * The API server's DNS name, as kubeadm's controlPlaneEndpoint gives one: in its certificate, and
   * resolved on every node by the node's own /etc/hosts (never by the cluster's DNS).
   */
  apiServerName: string;
  serviceCIDR: string;
  kubernetesServiceIP: string;
  clusterCIDR: string;
  clusterDNS: string;
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

export function clusterPlan(nodeCount = 2, state = '/var/lib/kpng-cluster'): ClusterPlan {
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
      ip: `172.30.0.${10 + i}`,
      podCIDR: `10.244.${i}.0/24`,
      podGateway: `10.244.${i}.1`,
      cgroupRoot: `/${name}`,
      dir: path.join(state, 'nodes', name),
      zone: realNodeZone(i),
    });
  }
  return {
    state,
    bridge: 'kc-br0',
    bridgeIP: '172.30.0.1',
    prefixLength: 24,
    apiServer: 'https://172.30.0.1:6443',
    apiServerPort: 6443,
    apiServerName: 'api.kpng-cluster.test',
    serviceCIDR: '10.96.0.0/16',
    kubernetesServiceIP: '10.96.0.1',
    clusterCIDR: '10.244.0.0/16',
    clusterDNS: '10.96.0.10',
    clusterDomain: 'cluster.local',
    nodes,
  };
}

/** The routes a node needs to the other nodes' pods (no overlay: every node is on one bridge). */
export function podRoutes(plan: ClusterPlan, node: NodePlan): { cidr: string; via: string }[] {
  return plan.nodes.filter((n) => n.name !== node.name).map((n) => ({ cidr: n.podCIDR, via: n.ip }));
}

export function kubeletConfig(plan: ClusterPlan, node: NodePlan, caFile: string): string {
  // JSON is YAML: no YAML writer needed, and the field names stay exactly as the kubelet reads them.
  const config = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: node.ip,
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

/** The node's CNI network: a bridge with host-local addresses from its pod CIDR, and loopback. */
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
          ranges: [[{ subnet: node.podCIDR, gateway: node.podGateway }]],
          routes: [{ dst: '0.0.0.0/0' }],
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
  ];
  const arr = (name: string, pick: (n: NodePlan) => string) => `${name}=(${plan.nodes.map((n) => sq(pick(n))).join(' ')})`;
  lines.push(
    arr('node_names', (n) => n.name),
    arr('node_netns', (n) => n.netns),
    arr('node_veths', (n) => n.hostVeth),
    arr('node_ips', (n) => n.ip),
    arr('node_pod_cidrs', (n) => n.podCIDR),
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
    else positional.push(a);
  }
  if (cmd === 'kwok-nodes' && count !== undefined && positional.length === 0) {
    process.stdout.write(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: kwokNodes(count, from) })}\n`);
    return 0;
  }
  const plan = clusterPlan(nodes, state);
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
  process.stderr.write('usage: plan.js env|kubeconfigs|node-files NAME [--nodes N] [--state DIR] [--pause-image REF]\n' +
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

// hack/cluster/plan.ts: the local cluster's addresses and its nodes' configuration files.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import {
  clusterPlan, cniConfig, containerdConfig, KWOK_MAX_NODES, KWOK_NODE_ANNOTATION, KWOK_POD_CIDR, KWOK_TAINT, kubeconfig, kubeletConfig,
  kwokNodes, podRoutes, realNodeZone, shellEnv, writeControlPlaneKubeconfigs, writeNodeFiles, ZONES,
} from '../hack/cluster/plan';

describe('cluster plan', () => {
  test('nodes get distinct addresses, pod CIDRs inside the cluster CIDR, and routes to every other node', () => {
    const plan = clusterPlan(3, '/tmp/kc');
    expect(plan.nodes.map((n) => n.name)).toEqual(['kc-node1', 'kc-node2', 'kc-node3']);
    expect(new Set(plan.nodes.map((n) => n.ip)).size).toBe(3);
    expect(new Set(plan.nodes.map((n) => n.podCIDR)).size).toBe(3);
    for (const n of plan.nodes) {
      expect(n.podCIDR.startsWith('10.244.')).toBe(true);
      expect(n.ip.startsWith('172.30.0.')).toBe(true);
      expect(n.ip).not.toBe(plan.bridgeIP);
      expect(n.dir).toBe(path.join('/tmp/kc/nodes', n.name));
    }
    expect(podRoutes(plan, plan.nodes[1])).toEqual([
      { cidr: '10.244.1.0/24', via: '172.30.0.11' },
      { cidr: '10.244.3.0/24', via: '172.30.0.13' },
    ]);
    // The API server is on the bridge, never behind the Service that the proxy under test serves.
    expect(plan.apiServer).toBe(`https://${plan.bridgeIP}:${plan.apiServerPort}`);
  });

  test('a bad node count or a relative state dir is refused with the reason', () => {
    expect(() => clusterPlan(0)).toThrow(/nodes: 0 is not a whole number from 1 to 9/);
    expect(() => clusterPlan(10)).toThrow(/from 1 to 9/);
    expect(() => clusterPlan(1.5)).toThrow(/whole number/);
    expect(() => clusterPlan(2, 'state')).toThrow(/not an absolute path/);
  });

  test('kubelet config: cgroupfs under the node root, its own address, no eviction or image GC', () => {
    const plan = clusterPlan(2, '/tmp/kc');
    const cfg = parse(kubeletConfig(plan, plan.nodes[1], '/tmp/kc/pki/ca.crt'));
    expect(cfg).toMatchObject({
      kind: 'KubeletConfiguration',
      address: '172.30.0.12',
      cgroupDriver: 'cgroupfs',
      cgroupRoot: '/kc-node2',
      failCgroupV1: false,
      clusterDNS: ['10.96.0.10'],
      imageGCHighThresholdPercent: 100,
      authentication: { x509: { clientCAFile: '/tmp/kc/pki/ca.crt' }, anonymous: { enabled: false } },
    });
    expect(cfg.volumePluginDir.startsWith('/tmp/kc/nodes/kc-node2/')).toBe(true);
  });

  test('containerd config keeps its root, netns and CNI config inside the node dir', () => {
    const plan = clusterPlan(1, '/tmp/kc');
    const toml = containerdConfig(plan.nodes[0], 'registry.k8s.io/pause:3.10.2');
    expect(toml).toMatch(/^version = 3$/m);
    expect(toml).toContain('root = "/tmp/kc/nodes/kc-node1/containerd"');
    expect(toml).toContain('sandbox = "registry.k8s.io/pause:3.10.2"');
    expect(toml).toContain('restrict_oom_score_adj = true');
    expect(toml).toContain('netns_mounts_under_state_dir = true');
    expect(toml).toContain('conf_dir = "/tmp/kc/nodes/kc-node1/cni/net.d"');
  });

  test('CNI: a bridge with hairpin mode, addresses from the node pod CIDR, no masquerade', () => {
    const node = clusterPlan(2, '/tmp/kc').nodes[1];
    const conf = JSON.parse(cniConfig(node));
    const bridge = conf.plugins.find((p: { type: string }) => p.type === 'bridge');
    expect(bridge).toMatchObject({ hairpinMode: true, isGateway: true, ipMasq: false });
    expect(bridge.ipam.ranges).toEqual([[{ subnet: '10.244.2.0/24', gateway: '10.244.2.1' }]]);
    expect(bridge.ipam.dataDir).toBe('/tmp/kc/nodes/kc-node2/cni/ipam');
  });

  test('kubeconfig: client certificate or token file, with the CA', () => {
    const cert = parse(kubeconfig('https://172.30.0.1:6443', '/ca.crt', { name: 'admin', certFile: '/a.crt', keyFile: '/a.key' }));
    expect(cert.clusters[0].cluster).toEqual({ server: 'https://172.30.0.1:6443', 'certificate-authority': '/ca.crt' });
    expect(cert.users[0]).toEqual({ name: 'admin', user: { 'client-certificate': '/a.crt', 'client-key': '/a.key' } });
    const token = parse(kubeconfig('https://x:6443', '/ca.crt', { name: 'sa', tokenFile: '/token' }));
    expect(token.users[0].user).toEqual({ tokenFile: '/token' });
    expect(token['current-context']).toBe('kpng-cluster');
  });

  test('shell env evaluates in bash to the same plan', () => {
    const plan = clusterPlan(2, "/tmp/it's here");
    const out = execFileSync('bash', ['-c', `${shellEnv(plan)}\necho "$state|\${node_names[1]}|\${node_ips[*]}|\${#node_dirs[@]}|$cluster_cidr"`], { encoding: 'utf8' });
    expect(out.trim()).toBe("/tmp/it's here|kc-node2|172.30.0.11 172.30.0.12|2|10.244.0.0/16");
  });

  test('node-files writes every file of one node, and refuses a node not in the plan', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kc-plan-'));
    try {
      const plan = clusterPlan(2, dir);
      const files = writeNodeFiles(plan, 'kc-node2', 'registry.k8s.io/pause:3.10.2');
      expect(files.map((f) => path.relative(dir, f)).sort()).toEqual([
        'nodes/kc-node2/cni/net.d/10-kpng-cluster.conflist',
        'nodes/kc-node2/containerd.toml',
        'nodes/kc-node2/kubelet.kubeconfig',
        'nodes/kc-node2/kubelet.yaml',
      ]);
      const kc = parse(fs.readFileSync(path.join(dir, 'nodes/kc-node2/kubelet.kubeconfig'), 'utf8'));
      expect(kc.users[0].name).toBe('system:node:kc-node2');
      expect(kc.users[0].user['client-certificate']).toBe(path.join(dir, 'pki/kc-node2.crt'));
      expect(() => writeNodeFiles(plan, 'kc-node3', 'p')).toThrow(/kc-node3 is not in the plan \(kc-node1, kc-node2\)/);
      // The control plane's kubeconfigs: each user's certificate, readable by root only.
      const cp = writeControlPlaneKubeconfigs(plan);
      expect(cp.map((f) => path.basename(f))).toEqual(['admin.kubeconfig', 'controller-manager.kubeconfig', 'scheduler.kubeconfig']);
      const sched = parse(fs.readFileSync(cp[2], 'utf8'));
      expect(sched.users[0]).toEqual({ name: 'scheduler', user: { 'client-certificate': path.join(dir, 'pki/scheduler.crt'), 'client-key': path.join(dir, 'pki/scheduler.key') } });
      expect(sched.clusters[0].cluster.server).toBe('https://172.30.0.1:6443');
      expect(fs.statSync(cp[0]).mode & 0o777).toBe(0o600);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('real nodes get zones round-robin, in the plan and in the shell env', () => {
    expect([1, 2, 3, 4, 5].map(realNodeZone)).toEqual(['zone-a', 'zone-b', 'zone-c', 'zone-a', 'zone-b']);
    expect(() => realNodeZone(0)).toThrow(/whole number from 1/);
    const plan = clusterPlan(4, '/tmp/kc');
    expect(plan.nodes.map((n) => n.zone)).toEqual(['zone-a', 'zone-b', 'zone-c', 'zone-a']);
    const out = execFileSync('bash', ['-c', `${shellEnv(plan)}\necho "\${node_zones[*]}"`], { encoding: 'utf8' });
    expect(out.trim()).toBe('zone-a zone-b zone-c zone-a');
  });
});

type KwokNode = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: { podCIDR: string; podCIDRs: string[]; taints: { key: string; value: string; effect: string }[] };
  status: { addresses: { type: string; address: string }[] };
};

const ipToInt = (ip: string) => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const inCIDR = (ip: string, cidr: string) => {
  const [net, bits] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  return Math.floor(ipToInt(ip) / size) === Math.floor(ipToInt(net) / size);
};

describe('kwok nodes', () => {
  test('names, labels, zones round-robin, the annotation kwok selects and the taint', () => {
    const nodes = kwokNodes(4) as KwokNode[];
    expect(nodes.map((n) => n.metadata.name)).toEqual(['kwok-node-1', 'kwok-node-2', 'kwok-node-3', 'kwok-node-4']);
    expect(nodes[1]).toEqual({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: 'kwok-node-2',
        labels: { type: 'kwok', 'kubernetes.io/hostname': 'kwok-node-2', 'kubernetes.io/os': 'linux', 'topology.kubernetes.io/zone': 'zone-b' },
        annotations: { 'kwok.x-k8s.io/node': 'fake' },
      },
      spec: {
        podCIDR: '10.128.0.64/26',
        podCIDRs: ['10.128.0.64/26'],
        taints: [{ key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' }],
      },
      status: { addresses: [{ type: 'InternalIP', address: '10.127.0.2' }, { type: 'Hostname', address: 'kwok-node-2' }] },
    });
    expect(nodes.map((n) => n.metadata.labels['topology.kubernetes.io/zone'])).toEqual(['zone-a', 'zone-b', 'zone-c', 'zone-a']);
    expect(ZONES).toEqual(['zone-a', 'zone-b', 'zone-c']);
    expect(KWOK_NODE_ANNOTATION).toEqual({ key: 'kwok.x-k8s.io/node', value: 'fake' });
    expect(KWOK_TAINT).toEqual({ key: 'kwok.x-k8s.io/node', value: 'fake', effect: 'NoSchedule' });
    // Each node's taint is its own object (kubectl and tests may change one).
    expect(nodes[0].spec.taints[0]).not.toBe(nodes[1].spec.taints[0]);
  });

  test('pod CIDRs: consecutive /26 blocks of 10.128.0.0/10, disjoint, up to the 10,000th node', () => {
    const nodes = kwokNodes(KWOK_MAX_NODES) as KwokNode[];
    expect(nodes).toHaveLength(10_000);
    expect(nodes[0].spec.podCIDR).toBe('10.128.0.0/26');
    expect(nodes[3].spec.podCIDR).toBe('10.128.0.192/26');
    expect(nodes[4].spec.podCIDR).toBe('10.128.1.0/26');
    expect(nodes[9999].spec.podCIDR).toBe('10.137.195.192/26');
    expect(nodes[9999].status.addresses[0].address).toBe('10.127.39.16');
    const starts = new Set<number>();
    for (const [i, n] of nodes.entries()) {
      const [net, bits] = n.spec.podCIDR.split('/');
      expect(bits).toBe('26');
      expect(n.spec.podCIDRs).toEqual([n.spec.podCIDR]);
      expect(ipToInt(net) - ipToInt('10.128.0.0')).toBe(i * 64);
      expect(inCIDR(net, KWOK_POD_CIDR)).toBe(true);
      starts.add(ipToInt(net));
    }
    expect(starts.size).toBe(10_000);
    // The node addresses are outside every pod CIDR, and distinct.
    const ips = nodes.map((n) => n.status.addresses[0].address);
    expect(new Set(ips).size).toBe(10_000);
    expect(ips.some((ip) => inCIDR(ip, KWOK_POD_CIDR) || inCIDR(ip, '10.244.0.0/16'))).toBe(false);
  });

  test('--from continues the numbering; past 10,000 nodes or a bad count is refused clearly', () => {
    const more = kwokNodes(2, 101) as KwokNode[];
    expect(more.map((n) => [n.metadata.name, n.spec.podCIDR, n.metadata.labels['topology.kubernetes.io/zone']])).toEqual([
      ['kwok-node-101', '10.128.25.0/26', 'zone-b'],
      ['kwok-node-102', '10.128.25.64/26', 'zone-c'],
    ]);
    expect(kwokNodes(0)).toEqual([]);
    expect(() => kwokNodes(10_001)).toThrow('kwok nodes: 10001 nodes asked for, at most 10000 (a /26 pod CIDR each of 10.128.0.0/10)');
    expect((kwokNodes(2, 9_999) as KwokNode[]).map((n) => n.metadata.name)).toEqual(['kwok-node-9999', 'kwok-node-10000']);
    expect(() => kwokNodes(3, 9_999)).toThrow(/10001 nodes asked for, at most 10000/);
    expect(() => kwokNodes(-1)).toThrow(/count -1 is not a whole number/);
    expect(() => kwokNodes(1.5)).toThrow(/whole number/);
    expect(() => kwokNodes(1, 0)).toThrow(/--from 0/);
  });

  test('the CLI prints a v1 List for kubectl, and refuses a bad count', () => {
    const plan = path.join(__dirname, '..', 'dist', 'hack', 'cluster', 'plan.js');
    const node = process.execPath;
    const list = JSON.parse(execFileSync(node, [plan, 'kwok-nodes', '--count', '3', '--from', '4'], { encoding: 'utf8' }));
    expect(list.apiVersion).toBe('v1');
    expect(list.kind).toBe('List');
    expect(list.items.map((n: KwokNode) => n.metadata.name)).toEqual(['kwok-node-4', 'kwok-node-5', 'kwok-node-6']);
    expect(list.items).toEqual(kwokNodes(3, 4));
    let err = '';
    try {
      execFileSync(node, [plan, 'kwok-nodes', '--count', '20000'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      err = String((e as { stderr: string }).stderr);
    }
    expect(err).toMatch(/plan: kwok nodes: 20000 nodes asked for, at most 10000/);
    err = '';
    try {
      execFileSync(node, [plan, 'kwok-nodes', '--count', 'x'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      err = String((e as { stderr: string }).stderr);
    }
    expect(err).toMatch(/--count: x is not a whole number/);
  });
});

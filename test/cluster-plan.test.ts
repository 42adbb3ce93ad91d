// hack/cluster/plan.ts: the local cluster's addresses and its nodes' configuration files.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import { clusterPlan, cniConfig, containerdConfig, kubeconfig, kubeletConfig, podRoutes, shellEnv, writeControlPlaneKubeconfigs, writeNodeFiles } from '../hack/cluster/plan';

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
});

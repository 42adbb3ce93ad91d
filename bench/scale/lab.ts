// bench:scale --lab: the same load and measurements without a cluster. The loopback control plane
// (etcd, kube-apiserver), the real kube-controller-manager and kube-scheduler, kwok running the nodes
// and their pods, and each proxy alone in a network namespace as the one real node (a Node object in
// zone-a, no kubelet). Quick to set up and to repeat, and a proxy can be given extra flags, so that
// settings can be compared (`nft:--min-change-period=0s`); the cluster mode (make cluster KWOK_NODES=N)
// adds kubelet, containerd, the DaemonSets and a second real node.
import { spawnSync } from 'node:child_process';
import { Lab } from '../vs-upstream/lab';
import { buildKubeProxy } from '../vs-upstream/proxies';
import { kpngMain, nodeBinary } from '../../test/shared/kpng-process';
import { startControlPlane, type ControlPlane } from '../../test/e2e/support/controlplane';
import { startKwokCluster } from '../../test/e2e/support/kwok-cluster';
import { Kube } from './kube';
import { runProxy, type RunOptions } from './run-proxy';
import type { LoadPlan } from './load-plan';
import type { ProxyKind } from './kernel-state';
import type { ProxyResult } from './report';
import type { ProxyTarget } from './targets';

/** The one real node: its name, zone and pod CIDR. */
export const LAB_NODE = { name: 'scale-lab-node', zone: 'zone-a', podCidr: '10.244.1.0/24' } as const;

export interface LabProxy {
  /** As the report names it. */
  name: string;
  kind: ProxyKind;
  /** The command, run in the node's namespace. */
  argv(kubeconfig: string): string[];
}

/**
 * A --proxies entry: `nft` (kpng's nftables backend) or `upstream` (kube-proxy in nftables mode), each
 * with kube-proxy's flags for one node and its default minimum sync period (1 s); after a `:`, flags
 * added to kpng's command line, `:`-separated (`nft:--min-change-period=0s`).
 */
export function labProxy(entry: string, kubeProxyBin: () => string): LabProxy {
  const [base, ...extra] = entry.split(':');
  const common = (kubeconfig: string) => ['--proxy-mode=nftables', `--kubeconfig=${kubeconfig}`, `--hostname-override=${LAB_NODE.name}`,
    `--cluster-cidr=10.244.0.0/16`, '--conntrack-max-per-core=0', '--oom-score-adj=0'];
  if (base === 'upstream') {
    if (extra.length) throw new Error(`--proxies ${entry}: flags can be added to kpng only`);
    const bin = kubeProxyBin();
    return { name: 'upstream', kind: 'upstream-nft', argv: (k) => [bin, ...common(k), '--v=0'] };
  }
  if (base !== 'nft') throw new Error(`--proxies ${entry}: --lab runs nft (kpng) and upstream (the eBPF backend needs a cluster: make cluster)`);
  return { name: ['nft', ...extra].join(' '), kind: 'kpng-nft', argv: (k) => [nodeBinary(), kpngMain(), ...common(k), ...extra] };
}

export interface LabRun {
  plan: LoadPlan;
  /** kwok nodes to create (at least the plan's pods / 56). */
  kwokNodes: number;
  proxies: string[];
  runs: number;
  log: (m: string) => void;
  runOptions?: RunOptions;
  /** Each result as it comes (the caller writes the report). */
  onResult: (r: ProxyResult) => void;
}

/** The one real node's Node object, created in the control plane. */
export async function createLabNode(cp: ControlPlane): Promise<void> {
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: LAB_NODE.name, labels: { 'kubernetes.io/hostname': LAB_NODE.name, 'topology.kubernetes.io/zone': LAB_NODE.zone } }, spec: { podCIDR: LAB_NODE.podCidr, podCIDRs: [LAB_NODE.podCidr] } };
  const created = await cp.request('POST', '/api/v1/nodes', node);
  if (created.status !== 201) throw new Error(`creating the lab's Node: HTTP ${created.status}: ${created.text.slice(0, 200)}`);
}

/** The bench's API client for the control plane, with its token and CA (client-node's loader is not needed for one server). */
export function labKube(cp: ControlPlane): Kube {
  return new Kube({ server: cp.server, apply: async (r) => { r.ca = cp.caPem; r.headers = { ...r.headers, Authorization: `Bearer ${cp.token}` }; } });
}

/**
 * Starts `p` in a network namespace of its own (named after `tag`) as the lab's node, and resolves once
 * its metrics answer (its first sync is done well before the load's first change), with the target the
 * measurements read. The caller stops the lab.
 */
export async function startLabProxy(p: LabProxy, cp: ControlPlane, tag: string): Promise<{ lab: Lab; target: ProxyTarget }> {
  const lab = await Lab.create(tag, Number(new URL(cp.server).port));
  try {
    const proc = lab.startProxy(p.argv(cp.kubeconfigPath));
    const t0 = Date.now();
    while (spawnSync('ip', ['netns', 'exec', lab.netns, 'curl', '-sf', '-o', '/dev/null', 'http://127.0.0.1:10249/metrics']).status !== 0) {
      if (!lab.proxyRunning || Date.now() - t0 > 120_000) throw new Error(`${p.name} did not serve /metrics: ${lab.stderrTail.join('\n')}`);
      await new Promise((res) => setTimeout(res, 500));
    }
    const target: ProxyTarget = { node: LAB_NODE.name, zone: LAB_NODE.zone, pod: p.name, kind: p.kind, netns: lab.netns, pid: proc.pid, place: { netns: lab.netns }, metricsPort: 10249 };
    return { lab, target };
  } catch (e) {
    await lab.stop();
    throw e;
  }
}

export async function runLab(o: LabRun): Promise<void> {
  let bin: string | undefined;
  const proxies = o.proxies.map((p) => labProxy(p, () => (bin ??= buildKubeProxy())));
  const cp = await startControlPlane({ keepAlive: true, log: (m) => o.log(`controlplane: ${m}`) });
  try {
    const kwok = await startKwokCluster(cp, o.kwokNodes, o.log);
    try {
      await createLabNode(cp);
      const kube = labKube(cp);
      try {
        for (let r = 0; r < o.runs; r++) {
          for (const i of proxies.map((_, k) => (k + r) % proxies.length)) {
            const { lab, target } = await startLabProxy(proxies[i], cp, 'scl');
            try {
              o.log(`${proxies[i].name} run ${r + 1}: pid ${target.pid} in netns ${lab.netns}`);
              o.onResult(await runProxy(kube, o.plan, proxies[i].name, r + 1, [target], { ...o.runOptions, log: o.log }));
            } finally {
              await lab.stop();
            }
          }
        }
      } finally {
        kube.close();
      }
    } finally {
      await kwok.stop();
    }
  } finally {
    await cp.stop();
  }
}

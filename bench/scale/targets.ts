// The proxies under test, one per real node: found by their pods' labels (k8s-app=kpng or
// kube-proxy), as an operator would find them on any cluster. On the local cluster (hack/cluster) the
// bench also reaches each node's network namespace (kc-node<i>): the proxy's /metrics on the node's
// loopback, its process (CPU, memory, syscalls from /proc and perf) and its kernel state.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import type { Kube } from './kube';
import type { KernelPlace, ProxyKind } from './kernel-state';

export interface ProxyTarget {
  node: string;
  zone?: string;
  pod: string;
  kind: ProxyKind;
  /** The node's network namespace (ip netns name), when the bench runs on the node's host. */
  netns?: string;
  /** The proxy's process on this host, when the bench can see it. */
  pid?: number;
  /** A process in the node's mount namespace (its bpffs), for the eBPF backend's maps. */
  nodePid?: number;
  place?: KernelPlace;
  metricsPort: number;
}

export const PROXY_SELECTOR = 'k8s-app in (kpng,kube-proxy)';

/** Which proxy a pod runs: kube-proxy's pods are `upstream-nft` (the bench deploys nftables mode). */
export function kindOfPod(pod: any): ProxyKind {
  if (pod.metadata?.labels?.['k8s-app'] === 'kube-proxy') return 'upstream-nft';
  const args: string[] = pod.spec?.containers?.[0]?.args ?? [];
  return args.some((a) => a === '--to=ebpf' || a === '--to ebpf') ? 'kpng-ebpf' : 'kpng-nft';
}

const inode = (p: string): number | undefined => { try { return fs.statSync(p).ino; } catch { return undefined; } };

/** The host pid of the proxy in a network namespace (kube-proxy, or a node process running kpng). */
export function proxyPid(netns: string, kind: ProxyKind): number | undefined {
  const want = inode(`/run/netns/${netns}`);
  if (want === undefined) return undefined;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (fs.statSync(`/proc/${d}/ns/net`).ino !== want) continue;
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      const isProxy = kind === 'upstream-nft' ? cmd[0].endsWith('kube-proxy') : cmd.some((a) => /kpng(\.js)?$/.test(a)) && !cmd[0].endsWith('kube-proxy');
      if (isProxy) return Number(d);
    } catch { /* gone meanwhile */ }
  }
  return undefined;
}

/**
 * The proxies of the cluster, one per node that runs one. `netnsOf` maps a node name to its network
 * namespace on this host, `nodePidOf` to a process in the node's own mount namespace (where its
 * /sys/fs/bpf and tools are; the proxy's container has neither python nor nft), when there are such.
 */
export async function findProxies(kube: Kube, netnsOf: (node: string) => string | undefined, nodePidOf: (node: string) => number | undefined = () => undefined): Promise<ProxyTarget[]> {
  const pods = (await kube.list('/api/v1/namespaces/kube-system/pods', `labelSelector=${encodeURIComponent(PROXY_SELECTOR)}`)).items;
  const out: ProxyTarget[] = [];
  for (const pod of pods) {
    if (pod.status?.phase !== 'Running' || pod.metadata.deletionTimestamp) continue;
    const node = pod.spec.nodeName as string;
    const n = await kube.must('GET', `/api/v1/nodes/${node}`);
    const kind = kindOfPod(pod);
    const netns = netnsOf(node);
    const pid = netns ? proxyPid(netns, kind) : undefined;
    const nodePid = nodePidOf(node);
    const place: KernelPlace | undefined = netns ? (kind === 'kpng-ebpf' && nodePid ? { nsPid: nodePid, netns } : { netns }) : undefined;
    out.push({ node, zone: n.body.metadata?.labels?.['topology.kubernetes.io/zone'], pod: pod.metadata.name, kind, netns, pid, nodePid, place, metricsPort: 10249 });
  }
  return out.sort((a, b) => a.node.localeCompare(b.node));
}

/** The proxy's /metrics text: from inside its node's namespace (its default bind is the node's loopback), else through the API server's pod proxy. */
export async function scrapeMetrics(kube: Kube, t: ProxyTarget): Promise<string> {
  if (t.netns) {
    return new Promise((resolve, reject) => {
      execFile('ip', ['netns', 'exec', t.netns!, 'curl', '-sSf', '-m', '20', `http://127.0.0.1:${t.metricsPort}/metrics`], { maxBuffer: 64 << 20 }, (err, out, errOut) => {
        if (err) reject(new Error(`metrics of ${t.pod} on ${t.node}: ${errOut.trim() || err.message}`));
        else resolve(out);
      });
    });
  }
  const r = await kube.must('GET', `/api/v1/namespaces/kube-system/pods/${t.pod}:${t.metricsPort}/proxy/metrics`);
  return r.text;
}

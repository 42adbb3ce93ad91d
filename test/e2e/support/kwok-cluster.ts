// A control plane that can run a workload without real nodes, for tests of bench:scale's harness:
// the loopback control plane (controlplane.ts) plus the real kube-controller-manager (Deployments,
// ReplicaSets, EndpointSlices, garbage collection, namespaces, service accounts), kube-scheduler, and
// kwok managing fake nodes (hack/cluster/kwok/stages.yaml: nodes Ready, pods Running and Ready with
// addresses from their node's pod CIDR). The binaries come from `hack/cluster/build.sh --scale`
// (`make scale-bins`). stop() ends the three processes; the control plane is the caller's.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { kwokNodes } from '../../../hack/cluster/plan';
import type { ControlPlane } from './controlplane';
import { repoRoot } from '../../shared/kpng-process';

export const SCALE_BINARIES = ['kube-controller-manager', 'kube-scheduler', 'kwok'] as const;

const ROOT = repoRoot();

/** The cluster binaries' directory (hack/cluster/build.sh --print-dir). */
export function clusterBinDir(): string {
  return execFileSync(path.join(ROOT, 'hack', 'cluster', 'build.sh'), ['--print-dir'], { encoding: 'utf8' }).trim();
}

export interface KwokCluster {
  /** Stops kwok, the scheduler and the controller-manager (SIGTERM, then SIGKILL after 5 s). */
  stop(): Promise<void>;
  logs: string;
}

const CONTROLLERS = [
  'deployment-controller', 'replicaset-controller', 'endpointslice-controller', 'garbage-collector-controller',
  'namespace-controller', 'serviceaccount-controller',
  // It lifts the not-ready taint that admission puts on every new node once kwok has made the node Ready.
  'node-lifecycle-controller',
].join(',');

export async function startKwokCluster(cp: ControlPlane, kwokNodeCount: number, log: (m: string) => void = () => {}): Promise<KwokCluster> {
  const bin = clusterBinDir();
  const logs = path.join(cp.dir, 'kwok-cluster');
  fs.mkdirSync(logs, { recursive: true });
  const procs: ChildProcess[] = [];
  const start = (name: string, argv: string[]) => {
    const out = fs.openSync(path.join(logs, `${name}.log`), 'a');
    const p = spawn(path.join(bin, name), argv, { stdio: ['ignore', out, out] });
    fs.closeSync(out);
    procs.push(p);
  };
  const stop = async () => {
    await Promise.all(procs.map((p) => new Promise<void>((resolve) => {
      if (p.exitCode !== null || p.signalCode !== null) return resolve();
      const t = setTimeout(() => p.kill('SIGKILL'), 5000);
      p.once('exit', () => { clearTimeout(t); resolve(); });
      p.kill('SIGTERM');
    })));
  };
  try {
    start('kube-controller-manager', [`--kubeconfig=${cp.kubeconfigPath}`, '--leader-elect=false', '--secure-port=0', `--controllers=${CONTROLLERS}`,
      '--use-service-account-credentials=false', '--kube-api-qps=100', '--kube-api-burst=200', '--v=1']);
    start('kube-scheduler', [`--kubeconfig=${cp.kubeconfigPath}`, '--leader-elect=false', '--secure-port=0', '--kube-api-qps=100', '--kube-api-burst=200', '--v=1']);
    start('kwok', [`--kubeconfig=${cp.kubeconfigPath}`, '--manage-all-nodes=false', '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
      `--config=${path.join(ROOT, 'hack', 'cluster', 'kwok', 'stages.yaml')}`, '--node-lease-duration-seconds=40', '--v=-4']);
    for (const n of kwokNodes(kwokNodeCount)) {
      const r = await cp.request('POST', '/api/v1/nodes', n);
      if (r.status !== 201) throw new Error(`creating a kwok node: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    }
    const t0 = Date.now();
    for (;;) {
      const r = await cp.request('GET', '/api/v1/nodes?labelSelector=type%3Dkwok');
      const ready = (r.body?.items ?? []).filter((n: any) => n.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')).length;
      if (ready === kwokNodeCount) break;
      for (const p of procs) if (p.exitCode !== null) throw new Error(`${p.spawnfile} exited (${p.exitCode}); logs in ${logs}`);
      if (Date.now() - t0 > 120_000) throw new Error(`${ready} of ${kwokNodeCount} kwok nodes Ready after 120 s; logs in ${logs}`);
      await new Promise((res) => setTimeout(res, 500));
    }
    log(`${kwokNodeCount} kwok nodes Ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return { stop, logs };
  } catch (e) {
    await stop();
    throw e;
  }
}

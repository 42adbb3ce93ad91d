// The running local cluster (hack/cluster/up.sh) as the chaos runner sees it: where its binaries and
// state are, and commands run against it. Every command is asynchronous, so that the probes the
// runner keeps in its own event loop are never held up by one.
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { clusterPlan, type ClusterPlan, type IPFamily } from '../cluster/plan';

export const REPO = path.resolve(__dirname, '..', '..', '..');

export interface Cluster {
  plan: ClusterPlan;
  bin: string;
  state: string;
  /** Image references the nodes imported (hack/cluster/images.sh's refs file). */
  images: Record<string, string>;
}

export interface RunOptions {
  timeoutMs?: number;
  input?: string;
  /** Resolve with the output even when the command fails (its status in `code`). */
  allowFail?: boolean;
}

export interface RunOutput {
  stdout: string;
  stderr: string;
  code: number;
}

/** A command, its output; rejects on a non-zero exit unless allowFail. */
export function run(cmd: string, args: string[], o: RunOptions = {}): Promise<RunOutput> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: o.timeoutMs ?? 60_000, maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      if (err && !o.allowFail) reject(new Error(`${cmd} ${args.join(' ').slice(0, 200)}: ${(stderr || err.message).trim().slice(0, 500)}`));
      else resolve({ stdout, stderr, code });
    });
    if (o.input !== undefined) child.stdin?.end(o.input);
  });
}

/** The cluster that is up: its plan as up.sh recorded it, and hack/cluster/lib/common.sh's paths. */
export async function openCluster(): Promise<Cluster> {
  const { stdout } = await run('bash', ['-c', `source ${REPO}/hack/cluster/lib/common.sh >/dev/null; echo "$cluster_bin"; echo "$cluster_state"; echo "$cache/cluster/$k8s_version/images"`]);
  const [bin, state, imageDir] = stdout.trim().split('\n');
  if (!fs.existsSync(path.join(state, 'up'))) throw new Error(`no cluster is up in ${state} (make cluster)`);
  const nodes = Number(fs.readFileSync(path.join(state, 'node-count'), 'utf8'));
  const family = (fs.existsSync(path.join(state, 'family')) ? fs.readFileSync(path.join(state, 'family'), 'utf8').trim() : 'ipv4') as IPFamily;
  const images: Record<string, string> = {};
  for (const line of fs.readFileSync(path.join(imageDir, 'refs'), 'utf8').split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) images[line.slice(0, i)] = line.slice(i + 1);
  }
  return { plan: clusterPlan(nodes, state, family), bin, state, images };
}

export function kubectl(c: Cluster, args: string[], o: RunOptions = {}): Promise<RunOutput> {
  return run(path.join(c.bin, 'kubectl'), ['--kubeconfig', path.join(c.state, 'admin.kubeconfig'), ...args], { timeoutMs: 30_000, ...o });
}

/**
 * A command in a node's network namespace, in the host's mount namespace (nsenter, not `ip netns
 * exec`, which remounts /sys: nft resolves `socket cgroupv2` paths under /sys/fs/cgroup).
 */
export function inNode(netns: string, cmd: string[], o: RunOptions = {}): Promise<RunOutput> {
  return run('nsenter', [`--net=/run/netns/${netns}`, '--', ...cmd], o);
}

/** The proxy's pod on a node (kpng or kube-proxy), or undefined. */
export async function proxyPod(c: Cluster, node: string): Promise<{ name: string; ready: boolean; uid: string } | undefined> {
  const out = await kubectl(c, ['-n', 'kube-system', 'get', 'pods', '-l', 'k8s-app in (kpng,kube-proxy)', '--field-selector', `spec.nodeName=${node}`,
    '-o', 'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.deletionTimestamp} {.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'], { allowFail: true, timeoutMs: 10_000 });
  for (const line of out.stdout.split('\n')) {
    const f = line.trim().split(/\s+/);
    // A pod being deleted has a deletionTimestamp (four fields): not the one that serves next.
    if (f.length === 3) return { name: f[0], uid: f[1], ready: f[2] === 'True' };
  }
  return undefined;
}

/** A daemon started for good (a session of its own: it outlives the runner), output appended to a file; its pid. */
export function startDetached(argv: string[], logFile: string): number {
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: ['ignore', fd, fd] });
  child.unref();
  fs.closeSync(fd);
  if (child.pid === undefined) throw new Error(`could not start ${argv[0]}`);
  return child.pid;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
export const now = (): number => Date.now() / 1000;

/** Polls `check` every `everyMs` until it returns true; the time (seconds since the epoch) it did, or undefined at the deadline. */
export async function until(check: () => Promise<boolean>, timeoutMs: number, everyMs = 200): Promise<number | undefined> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return now();
    await sleep(everyMs);
  }
  return undefined;
}

// deploy/ as kubectl renders it (`kubectl kustomize deploy/overlays/<backend>`), and kpng run the way
// the container of that DaemonSet runs it: the ConfigMap's keys as files, the container's args, root
// holding only the capabilities the manifest grants (setpriv's bounding set, as a runtime sets it),
// /proc/sys and the read-only volumes mounted read-only in a mount namespace of its own.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { Need } from './gate';
import { ep, list, node, slice, svc } from '../shared/objects';

/** The repository (also from dist/test/helpers/, where the guest's tests run compiled). */
export const REPO = path.resolve(__dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`), '../..');
const KPNG = path.join(REPO, 'dist/src/cli/main.js');

export type Obj = Record<string, any>;
export const OVERLAYS = ['nft', 'ebpf', 'ipvs'] as const;
export type Overlay = (typeof OVERLAYS)[number];

const works = (bin: string): boolean => spawnSync(bin, ['version', '--client'], { stdio: 'ignore' }).status === 0;

/** kubectl, for its built-in kustomize: $KUBECTL, else the local cluster's (hack/cluster/build.sh builds
 *  it at the cluster's version), else the one on PATH; undefined when there is none. */
export function findKubectl(): string | undefined {
  if (process.env.KUBECTL) return process.env.KUBECTL;
  const r = spawnSync(path.join(REPO, 'hack/cluster/build.sh'), ['--print-dir'], { encoding: 'utf8' });
  const built = r.status === 0 ? path.join(r.stdout.trim(), 'kubectl') : '';
  if (built && fs.existsSync(built) && works(built)) return built;
  return works('kubectl') ? 'kubectl' : undefined;
}

/** The gate's need (test/helpers/gate.ts) for tests that render deploy/. */
export const kubectlNeed = (): Need => ({ what: 'kubectl (kustomize renders deploy/)', met: findKubectl() !== undefined, fix: 'install kubectl, set KUBECTL, or build the local cluster\'s (hack/cluster/build.sh)' });

export function kubectlBin(): string {
  const bin = findKubectl();
  if (!bin) throw new Error(`no kubectl to render deploy/ with: ${kubectlNeed().fix}`);
  return bin;
}

export function kustomize(dir: string): Obj[] {
  const text = execFileSync(kubectlBin(), ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return parseAllDocuments(text).map((d) => d.toJS() as Obj).filter(Boolean);
}

export interface Rendered {
  objs: Obj[];
  ds: Obj;
  container: Obj;
  configMap: Obj;
}

export function renderOverlay(name: Overlay): Rendered {
  const objs = kustomize(path.join(REPO, 'deploy', 'overlays', name));
  const ds = objs.find((o) => o.kind === 'DaemonSet');
  if (!ds) throw new Error(`deploy/overlays/${name}: no DaemonSet`);
  const container = ds.spec.template.spec.containers[0];
  const vol = ds.spec.template.spec.volumes.find((v: Obj) => v.configMap);
  const configMap = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === vol?.configMap.name);
  if (!configMap) throw new Error(`deploy/overlays/${name}: the DaemonSet's ConfigMap is not in the output`);
  return { objs, ds, container, configMap };
}

/** The capabilities the container is granted ('privileged': all of them, /proc/sys writable). */
export function granted(c: Obj): string[] | 'privileged' {
  const sc = c.securityContext ?? {};
  if (sc.privileged) return 'privileged';
  if (!(sc.capabilities?.drop ?? []).includes('ALL')) throw new Error('the container does not drop ALL: its capabilities are the runtime\'s defaults, not the manifest\'s');
  return [...(sc.capabilities?.add ?? [])];
}

// Capability numbers (linux/capability.h) of those a DaemonSet of deploy/ may name.
const CAP_NUMBERS: Record<string, number> = { NET_ADMIN: 12, NET_RAW: 13, SYS_MODULE: 16, SYS_ADMIN: 21, SYS_RESOURCE: 24, PERFMON: 38, BPF: 39 };

/** Whether this process's bounding set holds the capability: a sandbox's root may lack some, and what
 *  root does not hold it cannot hand to kpng either. */
export function held(cap: string): boolean {
  const n = CAP_NUMBERS[cap];
  if (n === undefined) throw new Error(`capability ${cap}: its number is not known here`);
  const bnd = BigInt('0x' + /^CapBnd:\s*([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]);
  return ((bnd >> BigInt(n)) & 1n) === 1n;
}

/**
 * Writes the ConfigMap's keys into `dir` (a ConfigMap volume) and returns the container's args with the
 * mount path moved to `dir` and $(NODE_NAME) set.
 */
export function containerArgs(r: Rendered, dir: string, nodeName: string): string[] {
  const volName = r.ds.spec.template.spec.volumes.find((v: Obj) => v.configMap?.name === r.configMap.metadata.name).name;
  const mount = r.container.volumeMounts.find((m: Obj) => m.name === volName).mountPath as string;
  fs.mkdirSync(dir, { recursive: true });
  for (const [k, v] of Object.entries(r.configMap.data as Record<string, string>)) {
    fs.writeFileSync(path.join(dir, k), v.split(mount + '/').join(dir + '/'));
  }
  return (r.container.args as string[]).map((a) => a.replace('$(NODE_NAME)', nodeName).split(mount + '/').join(dir + '/'));
}

export interface ContainerRun {
  /** The network namespace (a path under /var/run/netns): hostNetwork's node. */
  netns: string;
  /** Capabilities held, by name; 'all': everything this root holds (privileged). */
  caps: string[] | 'all';
  /** Paths remounted read-only for the run (/proc/sys and read-only volumes). */
  readOnly: string[];
  args: string[];
  timeoutMs?: number;
}

/** Runs kpng (node + dist/) once as the container would; returns its exit code and output. */
export function runAsContainer(o: ContainerRun): { code: number | null; out: string } {
  const node = path.join(REPO, 'node_modules/.bin/node');
  const mounts = o.readOnly.map((p) => `mount --bind ${p} ${p} && mount -o remount,bind,ro ${p} && `).join('');
  const bounding = o.caps === 'all' ? '' : `setpriv --bounding-set=-all${o.caps.map((c) => `,+${c.toLowerCase()}`).join('')} --inh-caps=-all `;
  const script = `${mounts}exec ${bounding}"$@"`;
  const r = spawnSync('nsenter', [`--net=${o.netns}`, 'unshare', '--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', node, KPNG, ...o.args],
    { encoding: 'utf8', timeout: o.timeoutMs ?? 120_000 });
  if (r.error) throw r.error;
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** The cluster both privilege tests program: one ClusterIP Service (10.96.7.7:80) with one endpoint, as a kubectl List. */
export const WEB_STATE = JSON.stringify(list([
  node('n1'),
  svc('web', { clusterIPs: ['10.96.7.7'], families: ['IPv4'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] }),
  slice('web-1', 'web', [ep('10.244.1.7', { ready: true, node: 'n1' })]),
]));

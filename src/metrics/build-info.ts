// kubernetes_build_info, with component-base's labels (metrics/version.go), filled with what a kpng
// process knows: its own version where Kubernetes puts its version, Node.js where it puts Go.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type * as Prom from 'prom-client';
import { Gauge } from './prom';

export const BUILD_INFO_LABELS = ['major', 'minor', 'git_version', 'git_commit', 'git_tree_state', 'build_date', 'go_version', 'compiler', 'platform'] as const;
export type BuildInfo = Record<(typeof BUILD_INFO_LABELS)[number], string>;

/** Go's GOARCH names for Node's process.arch, so "linux/amd64" reads as in an upstream build. */
const GOARCH: Partial<Record<NodeJS.Architecture, string>> = { x64: 'amd64', ia32: '386' };

/** What the build recorded (hack/stamp-build.js): its commit, whether the tree had changes, its date. */
export interface BuildStamp { gitCommit: string; gitTreeState: string; buildDate: string }

/** component-base's values for an unstamped build. */
export const UNSTAMPED: BuildStamp = { gitCommit: '', gitTreeState: '', buildDate: '1970-01-01T00:00:00Z' };

/** The stamp `npm run build` wrote beside the compiled sources (dist/src/build-stamp.json); UNSTAMPED without one. */
export function readBuildStamp(file: string = path.join(__dirname, '..', 'build-stamp.json')): BuildStamp {
  try {
    const s = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<BuildStamp>;
    const str = (v: unknown, d: string) => (typeof v === 'string' ? v : d);
    return { gitCommit: str(s.gitCommit, UNSTAMPED.gitCommit), gitTreeState: str(s.gitTreeState, UNSTAMPED.gitTreeState), buildDate: str(s.buildDate, UNSTAMPED.buildDate) || UNSTAMPED.buildDate };
  } catch {
    return UNSTAMPED;
  }
}

let ownStamp: BuildStamp | undefined;
/** This build's stamp, read once (the start line and kubernetes_build_info both want it). */
const buildStamp = (): BuildStamp => (ownStamp ??= readBuildStamp());

export function buildInfo(version: string, runtime: { version: string; platform: string; arch: NodeJS.Architecture } = process, stamp: BuildStamp = buildStamp()): BuildInfo {
  const [major = '', minor = ''] = version.split('.');
  return {
    major, // kpng's major version
    minor, // kpng's minor version
    git_version: `v${version}`, // kpng's version, v-prefixed as Kubernetes writes its own
    git_commit: stamp.gitCommit,
    git_tree_state: stamp.gitTreeState,
    build_date: stamp.buildDate,
    go_version: runtime.version, // the language runtime: Node.js's version
    compiler: 'v8', // what compiles kpng's code at run time (Go's label says gc)
    platform: `${runtime.platform}/${GOARCH[runtime.arch] ?? runtime.arch}`,
  };
}

/** `--version=raw`: the fields as kube-proxy prints its version.Info (Go's %#v). */
export function rawVersion(info: BuildInfo): string {
  const f: [string, string][] = [['Major', info.major], ['Minor', info.minor], ['GitVersion', info.git_version], ['GitCommit', info.git_commit],
    ['GitTreeState', info.git_tree_state], ['BuildDate', info.build_date], ['GoVersion', info.go_version], ['Compiler', info.compiler], ['Platform', info.platform]];
  return `version.Info{${f.map(([k, v]) => `${k}:${JSON.stringify(v)}`).join(', ')}}`;
}

export function registerBuildInfo(registry: Prom.Registry, info: BuildInfo): void {
  const g = new Gauge({
    name: 'kubernetes_build_info',
    help: 'A metric with a constant \'1\' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.',
    labelNames: BUILD_INFO_LABELS,
    registers: [registry],
  });
  g.labels(info).set(1);
}

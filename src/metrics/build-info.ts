// kubernetes_build_info, with component-base's labels (metrics/version.go), filled with what a kpng
// process knows: its own version where Kubernetes puts its version, Node.js where it puts Go.
import type * as Prom from 'prom-client';
import { Gauge } from './prom';

export const BUILD_INFO_LABELS = ['major', 'minor', 'git_version', 'git_commit', 'git_tree_state', 'build_date', 'go_version', 'compiler', 'platform'] as const;
export type BuildInfo = Record<(typeof BUILD_INFO_LABELS)[number], string>;

/** Go's GOARCH names for Node's process.arch, so "linux/amd64" reads as in an upstream build. */
const GOARCH: Partial<Record<NodeJS.Architecture, string>> = { x64: 'amd64', ia32: '386' };

export function buildInfo(version: string, runtime: { version: string; platform: string; arch: NodeJS.Architecture } = process): BuildInfo {
  const [major = '', minor = ''] = version.split('.');
  return {
    major, // kpng's major version
    minor, // kpng's minor version
    git_version: `v${version}`, // kpng's version, v-prefixed as Kubernetes writes its own
    git_commit: '', // an npm package carries no commit; component-base's value when unstamped
    git_tree_state: '', // likewise
    build_date: '1970-01-01T00:00:00Z', // component-base's value for an unstamped build
    go_version: runtime.version, // the language runtime: Node.js's version
    compiler: 'v8', // what compiles kpng's code at run time (Go's label says gc)
    platform: `${runtime.platform}/${GOARCH[runtime.arch] ?? runtime.arch}`,
  };
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

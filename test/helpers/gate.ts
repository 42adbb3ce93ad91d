// Gates for tests that need something of the machine (root, a tool, the native addon, dist/, a cgroup
// v2 mount). When a need is missing the gated tests are skipped; under KPNG_TEST_STRICT=1 (`make test`
// sets it) the gate also registers one failing test that says what is missing and how to get it, unless
// test/skip-allowlist.json lists the gated block with its reason. hack/test-summary.js then names every
// skipped test and fails on those the allow-list does not cover: nothing vanishes silently.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadNative } from '../../src/native';
import { loadTestNative } from './test-native';
import { strictTests } from './strict';

export { strictTests };

/** The repository root, whether this runs from test/helpers (jest) or dist/test/helpers (the guest). */
const ROOT = path.resolve(__dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`), '../..');

interface AllowEntry { file: string; test: string; reason: string }
interface AllowlistModule {
  loadAllowlist(): AllowEntry[];
  allowedBy(entries: AllowEntry[], file: string, name: string): AllowEntry | undefined;
}
// Plain JS shared with hack/test-summary.js (which runs without a build); loaded by path so that the
// compiled copy in dist/ finds it too.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const allowlist = require(path.join(ROOT, 'hack', 'skip-allowlist.js')) as AllowlistModule;

/** One thing a gated test needs: what, whether this machine has it, and how to get it. */
export interface Need { what: string; met: boolean; fix: string }


function tool(cmd: string, args: string[], pkg: string): Need {
  const r = spawnSync(cmd, args, { stdio: 'ignore' });
  return { what: `\`${cmd}\``, met: r.status === 0, fix: `install ${pkg} (hack/install-deps.sh does)` };
}

/** Whether `load` succeeds; when it throws, its message says how to get what is missing. */
function loads(what: string, load: () => unknown): Need {
  try {
    load();
    return { what, met: true, fix: '' };
  } catch (e) {
    return { what, met: false, fix: (e as Error).message };
  }
}

export const need = {
  root: (): Need => ({ what: 'root', met: process.getuid?.() === 0, fix: 'run the tests as root (network namespaces, nftables, BPF need it)' }),
  tool,
  /** What test/helpers/netns.ts's namespaces need: root, iproute2 and nft. */
  netns: (): Need[] => [need.root(), tool('ip', ['netns', 'list'], 'iproute2'), tool('nft', ['--version'], 'nftables')],
  ipset: (): Need => tool('ipset', ['--version'], 'ipset'),
  /** The iptables-legacy tools (x_tables), to build rulesets like an old node's kube-proxy. */
  iptablesLegacy: (): Need[] => ['iptables-legacy', 'ip6tables-legacy', 'iptables-legacy-save', 'ip6tables-legacy-restore']
    .map((cmd) => tool(cmd, ['--version'], 'iptables (its legacy variants)')),
  native: (): Need => loads('the native addon', loadNative),
  /** The test addon (test/native/: the full nftables listing, libnftnl's ids), built with the product's. */
  testNative: (): Need => loads('the test addon', loadTestNative),
  /** A file that `make build` makes (dist/, build/Release/...). */
  built: (file: string): Need => ({ what: path.relative(ROOT, file), met: fs.existsSync(file), fix: 'run `make build` (the BPF object also needs clang: hack/install-deps.sh)' }),
  cgroup2: (): Need => {
    // Lazy: only the eBPF suites pay for loading the backend.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { cgroup2Mount } = require('../../src/backend/ebpf') as typeof import('../../src/backend/ebpf');
    const at = cgroup2Mount(fs.readFileSync('/proc/self/mountinfo', 'utf8'));
    return { what: 'a cgroup v2 mount', met: at !== undefined, fix: 'none is listed in /proc/self/mountinfo: mount one (e.g. mount -t cgroup2 none /sys/fs/cgroup/unified)' };
  },
  /** Anything else, said in words. */
  that: (what: string, met: boolean, fix: string): Need => ({ what, met, fix }),
};

type Block = (name: string, fn: () => void) => void;
type Test = (name: string, fn: jest.ProvidesCallback, timeout?: number) => void;

/** The message of a strict gate's failing test. */
export function missingMessage(names: string[], missing: Need[]): string {
  return [
    `KPNG_TEST_STRICT=1 (make test): ${names.map((n) => `"${n}"`).join(', ')} skipped; missing here:`,
    ...missing.map((m) => `  - ${m.what}: ${m.fix}`),
    'Provide it, or list the skipped tests in test/skip-allowlist.json with the reason this machine cannot run them (docs/testing.md).',
  ].join('\n');
}

/**
 * `describe` and `test` that run when every need is met and are skipped otherwise. Usage:
 *   const d = gated(need.netns(), need.native()).describe;  d('...', () => { ... });
 */
export function gated(...needs: Array<Need | Need[]>): { describe: Block; test: Test } {
  const missing = needs.flat().filter((n) => !n.met);
  if (missing.length === 0) return { describe, test };
  // The gated blocks the allow-list does not cover; read when the failing test runs, after all are known.
  const unlisted: string[] = [];
  const strict = (name: string) => {
    if (!strictTests()) return;
    if (allowlist.allowedBy(allowlist.loadAllowlist(), expect.getState().testPath ?? '', name)) return;
    unlisted.push(name);
    // One failing test per gate (not one per gated test), registered beside the first block it holds back.
    if (unlisted.length === 1) {
      test(`gate: needs ${missing.map((m) => m.what).join(', ')}`, () => { throw new Error(missingMessage(unlisted, missing)); });
    }
  };
  return {
    describe: (name, fn) => { describe.skip(name, fn); strict(name); },
    test: (name, fn, timeout) => { test.skip(name, fn, timeout); strict(name); },
  };
}

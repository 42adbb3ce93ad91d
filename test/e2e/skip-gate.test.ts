// The acceptance of "no silent skips": the eBPF suite, run as `make test` runs it (KPNG_TEST_STRICT=1)
// in a private mount namespace whose cgroup v2 mounts are gone, fails with the reason, and
// hack/test-summary.js fails naming each of its skipped tests; the same skips listed in an allow-list
// with a reason pass, named with that reason.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ROOT } from '../helpers/cli';
import { gated, need } from '../helpers/gate';

const JEST = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
const SUMMARY = path.join(ROOT, 'hack', 'test-summary.js');
const SUITE = path.join(ROOT, 'test', 'e2e', 'ebpf.test.ts');
// A run where everything else passed: the summary also fails a run in which nothing passed.
const REST = path.join(ROOT, 'test', 'fixtures', 'test-summary', 'clean.json');

const d = gated(need.root(), need.tool('unshare', ['--version'], 'util-linux')).describe;

interface JestJson { numPendingTests: number; testResults: Array<{ assertionResults: Array<{ ancestorTitles: string[]; title: string; status: string }> }> }

/** Jest on the eBPF suite with no cgroup v2 mount in its view; its --json output and exit status. */
function runWithoutCgroup2(dir: string, env: NodeJS.ProcessEnv): { status: number | null; out: string; json: JestJson; file: string } {
  const file = path.join(dir, 'results.json');
  const r = spawnSync('unshare', ['-m', '--propagation', 'private', '--', 'sh', '-ec', 'umount -a -t cgroup2; exec "$@"', 'sh',
    process.execPath, JEST, '--ci', '--maxWorkers=1', '--json', `--outputFile=${file}`, '--runTestsByPath', SUITE],
  { cwd: ROOT, encoding: 'utf8', env: { ...process.env, KPNG_TEST_STRICT: '1', ...env }, timeout: 300_000 });
  return { status: r.status, out: r.stdout + r.stderr, json: JSON.parse(fs.readFileSync(file, 'utf8')) as JestJson, file };
}

function summarise(file: string, env: NodeJS.ProcessEnv): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [SUMMARY, file, REST], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env } });
  return { status: r.status, out: r.stdout + r.stderr };
}

const skippedNames = (j: JestJson) => j.testResults.flatMap((s) => s.assertionResults)
  .filter((a) => a.status === 'pending').map((a) => ['test/e2e/ebpf.test.ts', ...a.ancestorTitles, a.title].join(' › '));

d('a gate whose condition is removed (no cgroup v2 mount) under make test', () => {
  let dir = '';
  beforeAll(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsk-gate-')); });
  afterAll(() => { if (dir) fs.rmSync(dir, { recursive: true, force: true }); });

  test('jest fails with what is missing; the summary fails naming every skipped test', () => {
    const list = path.join(dir, 'empty.json');
    fs.writeFileSync(list, '{"entries":[]}');
    const run = runWithoutCgroup2(dir, { KPNG_SKIP_ALLOWLIST: list });
    expect(run.status).toBe(1);
    expect(run.out).toContain('✕ gate: needs a cgroup v2 mount');
    expect(run.out).toContain('- a cgroup v2 mount: none is listed in /proc/self/mountinfo: mount one');
    const names = skippedNames(run.json);
    expect(names.length).toBe(run.json.numPendingTests);
    expect(names.length).toBeGreaterThan(5);
    const s = summarise(run.file, { KPNG_SKIP_ALLOWLIST: list });
    expect(s.status).toBe(1);
    expect(s.out).toContain('  test/e2e/ebpf.test.ts › gate: needs a cgroup v2 mount\n');
    const notAllowed = s.out.split('skipped, NOT on ')[1] ?? '';
    for (const n of names) expect(notAllowed).toContain(`  ${n}\n`);
  });

  test('the same skips on an allow-list with their reason: jest passes, the summary names them with the reason', () => {
    const list = path.join(dir, 'allow.json');
    fs.writeFileSync(list, JSON.stringify({ entries: [{ file: 'test/e2e/ebpf.test.ts', test: '^eBPF backend', reason: 'no cgroup v2 mount here' }] }));
    const run = runWithoutCgroup2(dir, { KPNG_SKIP_ALLOWLIST: list });
    expect(run.out).not.toContain('gate: needs');
    expect(run.status).toBe(0);
    const names = skippedNames(run.json);
    expect(names.length).toBeGreaterThan(5);
    const s = summarise(run.file, { KPNG_SKIP_ALLOWLIST: list });
    expect(s.out).not.toContain('NOT on');
    for (const n of names) expect(s.out).toContain(`  ${n} (no cgroup v2 mount here)\n`);
    expect(s.status).toBe(0);
  });
});

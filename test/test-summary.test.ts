// hack/test-summary.js, the last step of `make test`, on jest --json outputs (fixtures under
// test/fixtures/test-summary, written as jest writes them) and on skip allow-lists.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

interface AllowEntry { file: string; test: string; reason: string }
interface Input { path: string; result?: unknown; error?: string }
// Plain JS (it runs without a build): typed here at the boundary.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { summarise } = require('../hack/test-summary') as {
  summarise(inputs: Input[], entries: AllowEntry[], allowlistName?: string, root?: string): { lines: string[]; code: 0 | 1 };
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const list = require('../hack/skip-allowlist') as {
  parseAllowlist(text: string): AllowEntry[];
  loadAllowlist(file?: string): AllowEntry[];
  sourceName(file: string, root?: string): string;
};

const ROOT = path.resolve(__dirname, '..');
const FIX = path.join(__dirname, 'fixtures', 'test-summary');
const input = (name: string): Input => ({ path: name, result: JSON.parse(fs.readFileSync(path.join(FIX, name), 'utf8')) });
const run = (names: string[], entries: AllowEntry[] = []) => summarise(names.map(input), entries, 'allow.json', '/repo');
const EBPF_SKIPS = [
  '  test/e2e/ebpf.test.ts › eBPF backend › churn › added endpoints start',
  '  test/e2e/ebpf.test.ts › eBPF backend › restart',
  '  test/b.test.ts › later',
];

test('a clean run: totals only, exit 0', () => {
  expect(run(['clean.json', 'image.json'])).toEqual({ lines: ['tests: 4 passed, 0 failed, 0 skipped'], code: 0 });
});

test('every skipped (and todo) test is named, file and full name; not on the allow-list: exit 1', () => {
  const { lines, code } = run(['clean.json', 'skipped.json']);
  expect(code).toBe(1);
  expect(lines).toEqual([
    'skipped, NOT on allow.json (run them, or list them there with the reason this machine cannot):',
    ...EBPF_SKIPS,
    'tests: 4 passed, 0 failed, 3 skipped',
  ]);
});

test('skips the allow-list covers (file and a pattern over the full name) are named with their reason; the rest still fail', () => {
  const ebpf = { file: 'test/e2e/ebpf.test.ts', test: '^eBPF backend ', reason: 'no cgroup v2 on this machine' };
  const partly = run(['skipped.json'], [ebpf]);
  expect(partly.code).toBe(1);
  expect(partly.lines).toEqual([
    'skipped, allowed by allow.json:',
    '  test/e2e/ebpf.test.ts › eBPF backend › churn › added endpoints start (no cgroup v2 on this machine)',
    '  test/e2e/ebpf.test.ts › eBPF backend › restart (no cgroup v2 on this machine)',
    'skipped, NOT on allow.json (run them, or list them there with the reason this machine cannot):',
    '  test/b.test.ts › later',
    'tests: 1 passed, 0 failed, 3 skipped (2 allowed)',
  ]);
  const all = run(['skipped.json'], [ebpf, { file: 'test/b.test.ts', test: '^later$', reason: 'written next' }]);
  expect(all.code).toBe(0);
  expect(all.lines.at(-1)).toBe('tests: 1 passed, 0 failed, 3 skipped (3 allowed)');
});

test('an entry covers only its own file and what its pattern matches', () => {
  expect(run(['skipped.json'], [{ file: 'test/e2e/ebpf-other.test.ts', test: '.', reason: 'r' }]).lines).toEqual(expect.arrayContaining(EBPF_SKIPS));
  const { lines } = run(['skipped.json'], [{ file: 'test/e2e/ebpf.test.ts', test: 'restart$', reason: 'r' }]);
  expect(lines).toContain('  test/e2e/ebpf.test.ts › eBPF backend › churn › added endpoints start');
  expect(lines).toContain('  test/e2e/ebpf.test.ts › eBPF backend › restart (r)');
});

test('the guest\'s compiled files are named (and allow-listed) by their TypeScript source', () => {
  expect(run(['guest.json']).lines).toContain('  test/e2e/ipvs.guest.test.ts › ipvs › sctp');
  expect(run(['guest.json'], [{ file: 'test/e2e/ipvs.guest.test.ts', test: 'sctp', reason: 'no SCTP module in the guest' }]).code).toBe(0);
  expect(list.sourceName('/repo/dist/src/x.guest.test.js', '/repo')).toBe('src/x.guest.test.ts');
  expect(list.sourceName('/repo/test/y.test.ts', '/repo')).toBe('test/y.test.ts');
});

test('failed tests and files that failed to run are named; exit 1', () => {
  const { lines, code } = run(['failed.json']);
  expect(code).toBe(1);
  expect(lines).toEqual([
    'failed:',
    '  test/c.test.ts › block › breaks',
    '  test/d.test.ts: failed to run: Cannot find module \'x\'',
    'tests: 1 passed, 2 failed, 0 skipped',
  ]);
});

test('a missing results file, a run where nothing passed, and skips counted but not named all fail', () => {
  const missing = summarise([{ path: '.cache/jest-guest-results.json', error: 'ENOENT' }, input('clean.json')], [], 'allow.json', '/repo');
  expect(missing).toEqual({ lines: ['tests: 3 passed, 1 failed, 0 skipped (no jest results in .cache/jest-guest-results.json: ENOENT)'], code: 1 });
  expect(summarise([], [], 'allow.json', '/repo').code).toBe(1);
  const unnamed = run(['unnamed-skip.json']);
  expect(unnamed.code).toBe(1);
  expect(unnamed.lines).toContain('  unnamed-skip.json: 2 skipped test(s) it does not name');
});

describe('the allow-list file', () => {
  test.each([
    ['no entries array', '{}', /"entries" array/],
    ['an entry without its reason', '{"entries":[{"file":"test/a.test.ts","test":"x"}]}', /entry 0: "reason"/],
    ['a blank reason', '{"entries":[{"file":"test/a.test.ts","test":"x","reason":"  "}]}', /entry 0: "reason"/],
    ['a pattern that does not compile', '{"entries":[{"file":"test/a.test.ts","test":"(","reason":"r"}]}', /entry 0: "test" is not a regular expression/],
  ])('is refused with %s', (_what, text, err) => {
    expect(() => list.parseAllowlist(text)).toThrow(err);
  });

  test('the repository\'s is valid: empty, or every entry has its reason', () => {
    const entries = list.loadAllowlist(path.join(ROOT, 'test', 'skip-allowlist.json'));
    for (const e of entries) expect(e.reason.trim()).not.toBe('');
  });

  test('the summary fails when the list is not valid, naming it (KPNG_SKIP_ALLOWLIST points it elsewhere)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsk-allow-'));
    try {
      const bad = path.join(dir, 'allow.json');
      fs.writeFileSync(bad, '{"entries":[{"file":"test/a.test.ts","test":"x"}]}');
      const r = spawnSync(process.execPath, [path.join(ROOT, 'hack', 'test-summary.js'), path.join(FIX, 'clean.json')], { cwd: dir, encoding: 'utf8', env: { ...process.env, KPNG_SKIP_ALLOWLIST: bad } });
      expect(r.stdout).toBe('tests: allow.json is not a valid skip allow-list: skip allow-list entry 0: "reason" must be a non-empty string\n');
      expect(r.status).toBe(1);
      fs.writeFileSync(bad, '{"entries":[]}');
      const ok = spawnSync(process.execPath, [path.join(ROOT, 'hack', 'test-summary.js'), path.join(FIX, 'clean.json')], { cwd: dir, encoding: 'utf8', env: { ...process.env, KPNG_SKIP_ALLOWLIST: bad } });
      expect(ok.stdout).toBe('tests: 3 passed, 0 failed, 0 skipped\n');
      expect(ok.status).toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

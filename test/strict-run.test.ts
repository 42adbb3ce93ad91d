// What a CI or strict run refuses: rewriting golden files (KPNG_UPDATE_GOLDEN=1 with CI or
// KPNG_TEST_STRICT set fails, saying why), and variables that weaken a run (.ci/run clears them and
// sets CI before `make test`).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { goldenMode } from './helpers/scenario';

const ROOT = path.resolve(__dirname, '..');

describe('golden files', () => {
  test('compared by default, rewritten with KPNG_UPDATE_GOLDEN=1 alone', () => {
    expect(goldenMode({})).toBe('compare');
    expect(goldenMode({ KPNG_UPDATE_GOLDEN: '0', CI: '1' })).toBe('compare');
    expect(goldenMode({ KPNG_UPDATE_GOLDEN: '1' })).toBe('update');
    expect(goldenMode({ KPNG_UPDATE_GOLDEN: '1', CI: '' })).toBe('update');
  });

  test.each([
    [{ CI: '1' }, /KPNG_UPDATE_GOLDEN=1 with CI=1: golden files are never rewritten in CI or a strict run/],
    [{ CI: 'true' }, /with CI=true/],
    [{ KPNG_TEST_STRICT: '1' }, /with KPNG_TEST_STRICT=1/],
    [{ CI: '1', KPNG_TEST_STRICT: '1' }, /with CI=1 and KPNG_TEST_STRICT=1/],
  ])('never rewritten with %j: a clear failure instead', (env, message) => {
    expect(() => goldenMode({ KPNG_UPDATE_GOLDEN: '1', ...env })).toThrow(message);
  });

  test('the scenario suite fails under CI=1 KPNG_UPDATE_GOLDEN=1, saying why', () => {
    const goldens = fs.readdirSync(path.join(ROOT, 'test', 'scenarios')).filter((f) => f.endsWith('.golden'));
    const before = goldens.map((f) => fs.readFileSync(path.join(ROOT, 'test', 'scenarios', f), 'utf8'));
    const jest = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
    const r = spawnSync(process.execPath, [jest, 'test/scenarios.test.ts', '-t', 'golden files are rewritten only'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, CI: '1', KPNG_UPDATE_GOLDEN: '1', KPNG_TEST_STRICT: '' },
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/KPNG_UPDATE_GOLDEN=1 with CI=1: golden files are never rewritten/);
    expect(goldens.map((f) => fs.readFileSync(path.join(ROOT, 'test', 'scenarios', f), 'utf8'))).toEqual(before);
  });
});

describe('.ci/run', () => {
  const script = fs.readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8');
  // The names in its WEAKENING=( ... ) list, each line a few names and a comment.
  const list = /WEAKENING=\(([\s\S]*?)\n\)/.exec(script)?.[1] ?? '';
  const weakening = [...list.matchAll(/^\s*([A-Z0-9_ ]+?)\s*(?:#.*)?$/gm)].flatMap((m) => m[1]!.split(/\s+/));

  test('lists the variables that weaken a run', () => {
    expect(weakening).toEqual(expect.arrayContaining(['KPNG_UPDATE_GOLDEN', 'KPNG_SKIP_ALLOWLIST', 'KPNG_E2E_MODE', 'KPNG_FAULT_RUNS']));
  });

  test('clears them, sets CI=1 and runs `make test`', () => {
    // `make` must be looked up on PATH, so that the stand-in below is the one run (never the real suite).
    expect(script).toMatch(/^make test$/m);
    expect(script).not.toMatch(/\/make\b/);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-ci-run-'));
    try {
      const out = path.join(dir, 'out');
      fs.writeFileSync(path.join(dir, 'make'), `#!/bin/sh\n{ echo "args: $*"; echo "cwd: $(pwd)"; env; } > '${out}'\n`, { mode: 0o755 });
      const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${dir}:${process.env.PATH}`, CI: '' };
      for (const v of weakening) env[v] = '1';
      const r = spawnSync(path.join(ROOT, '.ci', 'run'), [], { encoding: 'utf8', env, cwd: os.tmpdir() });
      expect(r.status).toBe(0);
      const lines = fs.readFileSync(out, 'utf8').split('\n');
      expect(lines.slice(0, 2)).toEqual(['args: test', `cwd: ${ROOT}`]);
      expect(lines).toContain('CI=1');
      expect(lines.filter((l) => weakening.some((v) => l.startsWith(`${v}=`)))).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

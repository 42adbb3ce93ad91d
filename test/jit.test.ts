// Deferred optimizing compilers (src/util/jit.ts): the policy with fakes (fast), then real V8 in fresh
// Node processes (flags are process-wide): a hot function stays in the baseline tiers while deferred
// and is optimized once the compilers are back; and kpng itself defers them and turns them on when a
// cluster file is large. Runs the built modules (dist/, `make build`).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { nodeBinary, repoRoot } from './shared/kpng-process';
import { deferOptimizingCompilers, deferOptimizingCompilersFor, enableMaglev, enableOptimizingCompilers, optimizeWhenBusy, optimizingCompilersDeferred, JIT_OBJECTS, DEFAULT_MAGLEV_FLAGS } from '../src/util/jit';
import type { Logger } from '../src/util/log';
import { KPNG } from './helpers/cli';
import { ep, list, slice, svc, type Obj } from './shared/objects';

const JIT_JS = path.join(repoRoot(), 'dist', 'src', 'util', 'jit.js');

function recorder() {
  const flags: string[] = [];
  const lines: string[] = [];
  const log = { debug: (m: string) => lines.push(m), info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m), error: (m: string) => lines.push(m) } as unknown as Logger;
  return { flags, lines, log, setFlags: (f: string) => { flags.push(f); } };
}

describe('deferOptimizingCompilers', () => {
  test('turns TurboFan off and restricts Maglev unless the user chose compiler flags', () => {
    const r = recorder();
    expect(deferOptimizingCompilers('', r.setFlags)).toBe(true);
    expect(r.flags).toEqual(['--no-opt', '--invocation-count-for-maglev=3000', '--no-maglev-inlining']);
    for (const user of ['--no-opt', '--maglev', '--jitless', '--max-lite-mode', '--expose-gc --turbofan', '--no_maglev', '--no-maglev-inlining', '--invocation-count-for-maglev=10']) {
      const u = recorder();
      expect(deferOptimizingCompilers(user, u.setFlags)).toBe(false);
      expect(u.flags).toEqual([]);
    }
    // Unrelated flags are not compiler flags.
    expect(deferOptimizingCompilers('--optimize-for-size --max-old-space-size=100', recorder().setFlags)).toBe(true);
  });

  test('--jit on and --to api keep them from the start (in any spelling)', () => {
    for (const argv of [['kube', '--jit', 'on'], ['kube', '--jit=on'], ['kube', '--to', 'api'], ['file', '--to=api']]) {
      expect(deferOptimizingCompilersFor(argv)).toBe(false);
      expect(optimizingCompilersDeferred()).toBe(false);
    }
  });
});

describe('optimizeWhenBusy', () => {
  test('turns them on when the object count reaches the threshold, checked on demand', async () => {
    const r = recorder();
    let n = 10;
    const ac = new AbortController();
    const p = optimizeWhenBusy({ log: r.log, signal: ac.signal, objects: () => n, setFlags: r.setFlags, checkMs: 60_000, objectThreshold: 100 });
    expect(p.check()).toBe(false);
    expect(r.flags).toEqual([]);
    n = 100;
    expect(p.check()).toBe(true);
    expect(await p.done).toBe('100 objects (threshold 100)');
    expect(r.flags).toEqual([...DEFAULT_MAGLEV_FLAGS, '--opt']);
    expect(r.lines).toContain('jit: optimizing compilers on: 100 objects (threshold 100)');
    // Once on, it stays on: later checks change nothing.
    expect(p.check()).toBe(true);
    expect(r.flags).toHaveLength(DEFAULT_MAGLEV_FLAGS.length + 1);
  });

  test('turns them on when the CPU over the window reaches the share of a core, not before the window is covered', async () => {
    const r = recorder();
    let t = 0, cpu = 0;
    const ac = new AbortController();
    // Each check: 10 ms of clock; the first 40 ms at 10% of a core, then at 50%.
    const p = optimizeWhenBusy({
      log: r.log, signal: ac.signal, objects: () => 0, setFlags: r.setFlags, checkMs: 1, windowMs: 30, cpuShare: 0.25,
      now: () => t, cpuMs: () => { const v = cpu; t += 10; cpu += t <= 40 ? 1 : 5; return v; },
    });
    const reason = await p.done;
    expect(reason).toMatch(/% of a core over the last 0 s \(threshold 25%\)/);
    expect(r.flags).toEqual([...DEFAULT_MAGLEV_FLAGS, '--opt']);
    // Only windows that include the busy part can reach 25%.
    expect(t).toBeGreaterThan(40);
  });

  test('a process that stays small and quiet keeps them off; stopping ends the policy', async () => {
    const r = recorder();
    const ac = new AbortController();
    // A quiet process's CPU clock (the test's own, under a parallel jest run, can be busy for 5 ms).
    let cpu = 0;
    const p = optimizeWhenBusy({ log: r.log, signal: ac.signal, objects: () => 5, setFlags: r.setFlags, checkMs: 1, windowMs: 5, objectThreshold: 100, cpuMs: () => (cpu += 0.01) });
    await new Promise((ok) => setTimeout(ok, 30));
    ac.abort();
    expect(await p.done).toBeNull();
    expect(r.flags).toEqual([]);
  });
});

describe('real V8 (a fresh process each)', () => {
  beforeAll(() => {
    if (!fs.existsSync(JIT_JS)) throw new Error(`${JIT_JS} is missing: run \`make build\``);
  });

  test('enableMaglev gives Maglev its own thresholds back, only while the compilers are deferred', () => {
    const r = recorder();
    expect(deferOptimizingCompilersFor(['kube', '--jit', 'on'])).toBe(false);
    expect(enableMaglev(r.setFlags)).toBe(false);
    expect(r.flags).toEqual([]);
    expect(deferOptimizingCompilersFor(['kube'])).toBe(true);
    expect(enableMaglev(r.setFlags)).toBe(true);
    expect(r.flags).toEqual(DEFAULT_MAGLEV_FLAGS);
    // Still deferred: the policy turns TurboFan on later.
    expect(optimizingCompilersDeferred()).toBe(true);
    enableOptimizingCompilers();   // this worker's V8 as it was, for the tests that run in it next
  });

  test('after enableMaglev a hot function reaches Maglev, not TurboFan', () => {
    const script = `
      const jit = require(${JSON.stringify(JIT_JS)});
      jit.deferOptimizingCompilersFor([]);
      function f(a) { let s = 0; for (let i = 0; i < 100; i++) s += a * i; return s; }
      const warm = () => { for (let i = 0; i < 300000; i++) f(i); };
      const tier = () => %ActiveTierIsTurbofan(f) ? 'turbofan' : %ActiveTierIsMaglev(f) ? 'maglev' : %ActiveTierIsSparkplug(f) ? 'sparkplug' : 'ignition';
      const on = jit.enableMaglev();
      for (let k = 0; k < 6; k++) warm();
      process.stdout.write(JSON.stringify({ on, after: tier() }));`;
    const r = spawnSync(nodeBinary(), ['--allow-natives-syntax', '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
    expect(JSON.parse(r.stdout)).toEqual({ on: true, after: 'maglev' });
  });

  test('while deferred, a function run a few hundred times stays in the baseline tiers and a very hot one reaches Maglev only; optimized as usual once they are back', () => {
    const script = `
      const jit = require(${JSON.stringify(JIT_JS)});
      const deferred = jit.deferOptimizingCompilersFor([]);
      function g(a) { return a * 3 + 1; } // no loop: no on-stack replacement
      function f(a) { let s = 0; for (let i = 0; i < 100; i++) s += a * i; return s; }
      const warm = () => { for (let i = 0; i < 300000; i++) f(i); };
      const tier = (fn) => %ActiveTierIsTurbofan(fn) ? 'turbofan' : %ActiveTierIsMaglev(fn) ? 'maglev' : %ActiveTierIsSparkplug(fn) ? 'sparkplug' : 'ignition';
      let x = 0;
      for (let i = 0; i < 500; i++) x += g(i); // under V8's own Maglev threshold (400) and over it
      warm(); warm(); warm(); warm();
      const before = { warm: tier(g), hot: tier(f) };
      jit.enableOptimizingCompilers();
      for (let k = 0; k < 6; k++) warm();
      process.stdout.write(JSON.stringify({ deferred, before, after: tier(f), x: x > 0 }));`;
    const r = spawnSync(nodeBinary(), ['--allow-natives-syntax', '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
    const out = JSON.parse(r.stdout) as { deferred: boolean; before: { warm: string; hot: string }; after: string };
    expect(out.deferred).toBe(true);
    expect(['ignition', 'sparkplug']).toContain(out.before.warm);
    expect(out.before.hot).toBe('maglev');
    expect(['maglev', 'turbofan']).toContain(out.after);
  });

  test('kpng defers them, and turns them on when the cluster file has JIT_OBJECTS objects', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-jit-'));
    try {
      const dump = (services: number) => {
        const items: Obj[] = [];
        for (let i = 0; i < services; i++) {
          items.push(svc(`s${i}`, { ns: 'j', clusterIP: `10.96.${i >> 8}.${i & 255}`, ports: [{ port: 80, protocol: 'TCP' }] }));
          items.push(slice(`s${i}-a`, `s${i}`, [ep(`10.244.${i >> 8}.${i & 255}`, { ready: true })], { ns: 'j', ports: [{ port: 8080, protocol: 'TCP' }] }));
        }
        const f = path.join(dir, `${services}.json`);
        fs.writeFileSync(f, JSON.stringify(list(items)));
        return f;
      };
      const run = (file: string, extra: string[] = []) => {
        const r = spawnSync(nodeBinary(), [KPNG, 'file', '--input', file, '--node', 'n1', '--to', 'trace', '--once', '--log-level', 'debug', ...extra], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
        if (r.status !== 0) throw new Error(`kpng failed: ${r.stderr}`);
        return r.stderr;
      };
      const small = run(dump(10));
      expect(small).toMatch(/jit: optimizing compilers off until/);
      expect(small).not.toMatch(/jit: optimizing compilers on/);
      const large = run(dump(JIT_OBJECTS / 2));
      expect(large).toMatch(new RegExp(`jit: optimizing compilers on: ${JIT_OBJECTS} objects`));
      const on = run(dump(10), ['--jit', 'on']);
      expect(on).not.toMatch(/jit: optimizing compilers (off|on)/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

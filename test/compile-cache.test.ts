// Node's compile cache for kpng's own process (src/util/compile-cache.ts): where it goes, and that a
// kpng run fills it and logs it (or leaves it off when asked). Runs the built kpng (dist/).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { nodeBinary } from './shared/kpng-process';
import { compileCacheDir } from '../src/util/compile-cache';
import { KPNG } from './helpers/cli';
import { list, svc } from './shared/objects';

test('the cache directory: KPNG_COMPILE_CACHE, "off" or empty for none, else a kpng directory', () => {
  expect(compileCacheDir({ KPNG_COMPILE_CACHE: '/x/y' }, 0)).toBe('/x/y');
  expect(compileCacheDir({ KPNG_COMPILE_CACHE: 'off' }, 0)).toBeNull();
  expect(compileCacheDir({ KPNG_COMPILE_CACHE: '' }, 1000)).toBeNull();
  expect(compileCacheDir({}, 0)).toBe('/var/cache/kpng/compile-cache');
  expect(compileCacheDir({}, 1000)).toBe(path.join(os.tmpdir(), 'kpng-compile-cache-1000'));
});

describe('kpng with the cache', () => {
  let dir: string;
  let input: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-cc-'));
    input = path.join(dir, 'cluster.json');
    fs.writeFileSync(input, JSON.stringify(list([svc('a', { ns: 'c', clusterIP: '10.96.0.9', ports: [{ port: 80, protocol: 'TCP' }] })])));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const run = (env: Record<string, string>) => {
    const r = spawnSync(nodeBinary(), [KPNG, 'file', '--input', input, '--node', 'n1', '--once', '--log-level', 'debug'], { encoding: 'utf8', env: { ...process.env, NODE_COMPILE_CACHE: '', ...env } });
    if (r.status !== 0) throw new Error(`kpng failed: ${r.stderr}`);
    return r;
  };
  const files = (d: string): string[] => fs.readdirSync(d, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);

  test('a run fills the cache (its modules are in it after the first sync) and says where', () => {
    const cache = path.join(dir, 'cache');
    const r = run({ KPNG_COMPILE_CACHE: cache });
    expect(r.stderr).toContain(`compile cache: ${cache}`);
    expect(r.stdout).toContain('10.96.0.9');
    // One entry per compiled module: kpng's own and its dependencies', dozens of them.
    expect(files(cache).length).toBeGreaterThan(20);
    // The next run reads them (and still works).
    expect(run({ KPNG_COMPILE_CACHE: cache }).stdout).toContain('10.96.0.9');
  });

  test('off: no cache, and the log says why; a directory that cannot be made is not fatal', () => {
    expect(run({ KPNG_COMPILE_CACHE: 'off' }).stderr).toContain('compile cache: off (KPNG_COMPILE_CACHE is off)');
    const r = run({ KPNG_COMPILE_CACHE: '/proc/kpng-no-such-dir' });
    expect(r.stderr).toMatch(/compile cache: off \(.*ENOENT.*\/proc\/kpng-no-such-dir\)/);
    expect(r.stdout).toContain('10.96.0.9');
  });
});

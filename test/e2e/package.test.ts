// `npm pack` ships the native addon prebuilt (prebuildify, N-API: one binary for every Node version):
// the tarball installs in a clean directory on a PATH with no compiler, make or python, and the
// installed kpng runs and loads its addon. The prebuild is the portable one `npm run prebuildify` made
// when it is there and current, else a quick one from this machine's toolchain and libraries
// (`hack/build-native.sh --prebuild-host`): the portable cross build takes minutes cold, so it is not
// part of `make test`; `make install-test` proves it in Debian 11 and 12 roots, amd64 and arm64. The
// tarball holds no test-only native code: no test/native/ source, no test addon, none of its calls.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/cli';
import { gated, need } from '../helpers/gate';
import { loadTestNative } from '../helpers/test-native';

/** The npm CLI this machine has (the pinned node runs it). */
function npmCli(): string | undefined {
  const r = spawnSync('sh', ['-c', 'readlink -f "$(command -v npm)"'], { encoding: 'utf8' });
  const bin = r.stdout.trim();
  if (!bin) return undefined;
  const cli = bin.endsWith('.js') ? bin : path.join(path.dirname(bin), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
  return fs.existsSync(cli) ? cli : undefined;
}

const cli = npmCli();
const t = gated(
  need.that('the npm CLI', cli !== undefined, 'put npm (it comes with node) on PATH'),
  need.that('linux x64', process.platform === 'linux' && process.arch === 'x64', 'the prebuilt addon is made for linux-x64 only: run this test there'),
  need.testNative(),
).test;

t('npm pack ships a prebuilt addon and no test-only native code: installed without a compiler, kpng runs and loads it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-pack-'));
  try {
    // The release artifact: prebuilds/linux-x64/*.node, then the tarball.
    execFileSync('bash', [path.join(ROOT, 'hack', 'build-native.sh'), '--prebuild-host'], { cwd: ROOT, stdio: 'pipe' });
    const prebuilt = fs.readdirSync(path.join(ROOT, 'prebuilds', 'linux-x64'));
    expect(prebuilt.some((f) => f.endsWith('.node'))).toBe(true);
    const packed = JSON.parse(execFileSync(process.execPath, [cli!, 'pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })) as Array<{ filename: string; files: { path: string }[] }>;
    const files = packed[0].files.map((f) => f.path);
    expect(files).toContain('bin/kpng.js');
    expect(files.some((f) => f.startsWith('prebuilds/linux-x64/') && f.endsWith('.node'))).toBe(true);
    expect(files).toContain('prebuilds/linux-x64/sock_lb.bpf.o');   // the eBPF backend's program, beside the addon
    expect(files.some((f) => f.startsWith('dist/test/'))).toBe(false);
    // No test-only native code: neither the test addon's sources nor its binary.
    const testSources = fs.readdirSync(path.join(ROOT, 'test', 'native'));
    expect(testSources.length).toBeGreaterThan(0);
    expect(files.filter((f) => f.startsWith('test/') || testSources.includes(path.basename(f)) || f.endsWith('kpng_test_native.node'))).toEqual([]);

    // A PATH with node and nothing else: no cc, g++, make or python to fall back on.
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
    fs.symlinkSync('/bin/sh', path.join(bin, 'sh')); // npm runs install scripts with sh
    // The environment as it is (registry CA, proxy settings), but a PATH with nothing besides node.
    const env = { ...process.env, PATH: bin };
    expect(spawnSync('/bin/sh', ['-c', 'command -v cc g++ gcc make python3 || true'], { env, encoding: 'utf8' }).stdout.trim()).toBe('');
    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    const install = spawnSync(process.execPath, [cli!, 'install', '--no-audit', '--no-fund', '--omit=dev', path.join(dir, packed[0].filename)], { cwd: app, env, encoding: 'utf8' });
    expect(install.stderr).not.toMatch(/gyp ERR/);
    expect(install.status).toBe(0);

    const kpng = path.join(app, 'node_modules', 'kpng', 'bin', 'kpng.js');
    const version = spawnSync(process.execPath, [kpng, '--version'], { env, encoding: 'utf8' });
    expect(version.stdout).toMatch(/^kpng \d+\.\d+\.\d+/);
    const loaded = spawnSync(process.execPath, ['-e', "const n = require('kpng/dist/src/native'); n.loadNative(); console.log(require.resolve('kpng/dist/src/native'), n.nativeAvailable())"], { cwd: app, env, encoding: 'utf8' });
    expect(loaded.stdout.trim()).toMatch(/node_modules\/kpng\/dist\/src\/native\/index\.js true$/);
    // The packed addon holds none of the test addon's calls.
    const exported = spawnSync(process.execPath, ['-e', "console.log(JSON.stringify(Object.keys(require('kpng/dist/src/native').loadNative())))"], { cwd: app, env, encoding: 'utf8' });
    const testOnly = Object.keys(loadTestNative());
    expect(testOnly.length).toBeGreaterThan(0);
    expect((JSON.parse(exported.stdout) as string[]).filter((k) => testOnly.includes(k))).toEqual([]);
    // Loaded from the prebuild: the package has no build/ directory at all.
    expect(fs.existsSync(path.join(app, 'node_modules', 'kpng', 'build'))).toBe(false);
    const state = path.join(dir, 'state.yaml');
    fs.copyFileSync(path.join(ROOT, 'examples', 'cluster.yaml'), state);
    const routes = spawnSync(process.execPath, [kpng, 'file', '--input', state, '--node', 'n1', '--once', '--to', 'routes', '--format', 'jsonl'], { env, encoding: 'utf8' });
    expect(routes.status).toBe(0);
    expect(routes.stdout).toContain('"service":"default/web"');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 180000);

// The CLI is declared once (src/cli/spec.ts): every command answers --help with its own usage and
// flags, `kpng --help` prints each flag once, a flag of another command is refused by name, and
// durations take Go's form.
import { runKpng } from './helpers/cli';
import { COMMANDS } from '../src/cli/spec';
import { parseDuration } from '../src/util/duration';

test.each(COMMANDS.map((c) => c.name))('kpng %s --help prints that command\'s usage and flags', (name) => {
  const cmd = COMMANDS.find((c) => c.name === name)!;
  for (const argv of [[name, '--help'], ['help', name]]) {
    const r = runKpng(argv);
    expect(r.code).toBe(0);
    expect(r.stdout.startsWith(`kpng ${name}: ${cmd.summary}`)).toBe(true);
    for (const u of cmd.usage) expect(r.stdout).toContain(`kpng ${u}`);
  }
});

test('a command\'s help shows its flags only; kpng --help shows every flag and every backend flag once', () => {
  const file = runKpng(['file', '--help']).stdout;
  expect(file).toMatch(/--input FILE/);
  expect(file).not.toMatch(/--kubeconfig/);
  expect(file).not.toMatch(/--producer/);
  const kube = runKpng(['kube', '--help']).stdout;
  expect(kube).toMatch(/--kubeconfig PATH/);
  expect(kube).not.toMatch(/--input/);
  const all = runKpng(['--help']).stdout;
  const count = (re: RegExp) => all.split('\n').filter((l) => re.test(l)).length;
  // Shared by nft, ebpf and ipvs: printed once, under all three.
  expect(count(/^\s+--aggregator-min-interval\b/)).toBe(1);
  expect(all).toMatch(/--to nft, ipvs, ebpf:\n\s+--aggregator\b/);
  for (const flag of ['--input', '--kubeconfig', '--api', '--cluster-cidr', '--sync-period', '--listen', '--tls-ca']) expect(count(new RegExp(`^\\s+(-\\w, )?${flag}\\b`))).toBe(1);
  expect(runKpng(['help', 'kube-proxy']).stdout).toMatch(/--proxy-mode/);
});

test('a flag of another command is refused, naming the command it belongs to; an unknown help topic too', () => {
  const r = runKpng(['file', '--input', '/dev/null', '--kubeconfig', '/x']);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/--kubeconfig does not apply to kpng file \(it is a flag of kpng kube\)/);
  const p = runKpng(['publish', '--input', 'x']);
  expect(p.stderr).toMatch(/Unknown option '--input'/);
  expect(p.code).toBe(2);
  expect(runKpng(['help', 'nope']).code).toBe(2);
});

test('one duration parser: Go durations and bare seconds', () => {
  expect(parseDuration('1m30s')).toBe(90_000);
  expect(parseDuration('250ms')).toBe(250);
  expect(parseDuration('2')).toBe(2000);
  expect(parseDuration('0')).toBe(0);
  expect(parseDuration('1.5h')).toBe(5_400_000);
  expect(parseDuration('10 s')).toBeNull();
  expect(parseDuration('-1s')).toBeNull();
  const r = runKpng(['file', '--input', '/dev/null', '--min-sync-period', '1m30x']);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/--min-sync-period: "1m30x" is not a duration/);
});

test('--cleanup-only alone is refused (it narrows --cleanup, and would otherwise start a proxy)', () => {
  const r = runKpng(['--cleanup-only=kpng', '--hostname-override=x', '--kubeconfig=/nonexistent']);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/--cleanup-only kpng narrows --cleanup, which was not given/);
});

test('--version=raw prints the build fields as kube-proxy prints its version.Info, stamped by the build', () => {
  const r = runKpng(['--version=raw']);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/^version\.Info\{Major:"\d+", Minor:"\d+", GitVersion:"v[\d.]+", GitCommit:"[0-9a-f]{40}", GitTreeState:"(clean|dirty)", BuildDate:"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", GoVersion:"v\d+\.\d+\.\d+", Compiler:"v8", Platform:"linux\/\w+"\}\n$/);
  expect(runKpng(['--version']).stdout).toMatch(/^kpng \d+\.\d+\.\d+ \(node v/);
});

test('a kubeconfig that cannot be read is an error naming it, before anything on the node changes', () => {
  // No sysctl would change here (0: leave as is), but the health server would bind before the fix.
  const r = runKpng(['--kubeconfig=/nonexistent/kubeconfig', '--hostname-override=x', '--conntrack-max-per-core=0', '--conntrack-tcp-timeout-established=0',
    '--conntrack-tcp-timeout-close-wait=0', '--oom-score-adj=0', '--healthz-bind-address=127.0.0.1:0', '--metrics-bind-address=127.0.0.1:0']);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/cannot reach the API server: kubeconfig \/nonexistent\/kubeconfig: no such file; nothing on the node was changed/);
  expect(r.stderr).not.toMatch(/serving on/);
  // What runs is the first line.
  expect(r.stderr.split('\n')[0]).toMatch(/kpng v\d+\.\d+\.\d+ \(commit [0-9a-f]{12}.*\) on Node\.js v\d+.*: kube source, nft backend, node x$/);
});

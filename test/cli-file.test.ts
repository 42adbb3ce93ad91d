// The `kpng file` command end to end: the built binary on files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { KpngProcess, ROOT, runKpng } from './helpers/cli';
import { ep, node, slice, svc } from './helpers/k8s';
import { parseKlogLine } from './helpers/klog';

const example = path.join(ROOT, 'examples', 'cluster.yaml');
let dir: string;
beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-cli-')); });
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const writeList = (file: string, items: unknown[]) => fs.writeFileSync(file, stringify({ apiVersion: 'v1', kind: 'List', items }));

test('--once --to routes --format jsonl prints one exact line per service port', () => {
  const r = runKpng(['file', '--input', example, '--node', 'n1', '--once', '--to', 'routes', '--format', 'jsonl']);
  expect(r.code).toBe(0);
  expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([
    { service: 'default/api', protocol: 'TCP', port: 8000, internal: [], external: [] },
    { service: 'default/web', protocol: 'TCP', port: 80, internal: ['10.244.1.5:8080', '10.244.2.7:8080'], external: [] },
    { service: 'kube-system/dns', protocol: 'UDP', port: 53, internal: ['10.244.1.53:53', '[fd00:10:244:1::53]:53'], external: [] },
    { service: 'kube-system/dns', protocol: 'TCP', port: 53, internal: ['10.244.1.53:53', '[fd00:10:244:1::53]:53'], external: [] },
    { service: 'shop/front', protocol: 'TCP', port: 443, internal: ['10.244.1.20:8443', '10.244.2.20:8443'], external: ['10.244.1.20:8443'] },
  ]);
  // Key order is part of the format.
  expect(r.stdout.split('\n')[0]).toBe('{"service":"default/api","protocol":"TCP","port":8000,"internal":[],"external":[]}');
  // One warning, in klog's format: W, the date and time, kpng's pid, its source token.
  const lines = r.stderr.split('\n');
  expect(lines).toHaveLength(2);
  expect(lines[1]).toBe('');
  expect(parseKlogLine(lines[0])).toMatchObject({ severity: 'W', source: 'kpng:0', message: 'skipping Service default/broken: spec.ports[0].port 70000 out of range (1-65535)' });
  // --logging-format json: the same warning as component-base's JSON logger writes it.
  const json = runKpng(['file', '--input', example, '--node', 'n1', '--once', '--logging-format', 'json']);
  expect(json.code).toBe(0);
  const rec = JSON.parse(json.stderr) as Record<string, unknown>;
  expect(rec).toEqual({ ts: expect.any(Number), caller: 'kpng:0', msg: 'skipping Service default/broken: spec.ports[0].port 70000 out of range (1-65535)', v: 0 });
  expect(runKpng(['file', '--input', example, '--once', '--logging-format', 'xml']).stderr).toMatch(/--logging-format: "xml": expected text or json/);
});

test('the routes table for humans', () => {
  const r = runKpng(['file', '--input', example, '--node', 'n2', '--once']);
  expect(r.code).toBe(0);
  const lines = r.stdout.split('\n');
  expect(lines[0]).toBe('# node n2, revision 1');
  expect(lines[1]).toMatch(/^SERVICE\s+PORT\s+VIPS\s+INTERNAL\s+EXTERNAL$/);
  expect(r.stdout).toMatch(/shop\/front\s+443\/TCP node:30443\s+10\.96\.0\.20,192\.168\.60\.10\s+10\.244\.1\.20:8443,10\.244\.2\.20:8443\s+10\.244\.2\.20:8443/);
  expect(r.stdout).toMatch(/default\/api\s+8000\/TCP\s+10\.96\.0\.30\s+\(reject: no endpoints\)\s+-/);
});

test('--to dump prints the ENLS as JSON and YAML', () => {
  const json = runKpng(['file', '--input', example, '--node', 'n1', '--once', '--to', 'dump']);
  const state = JSON.parse(json.stdout);
  expect(state.node).toBe('n1');
  expect(state.items.map((i: { key: string }) => i.key)).toEqual(['node', 'svc/default/api', 'svc/default/web', 'svc/kube-system/dns', 'svc/shop/front']);
  const front = state.items[4].service;
  expect(front).toMatchObject({ type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, loadBalancerIps: { v4: ['192.168.60.10'], v6: [] } });
  expect(front.ports[0].port).toEqual({ name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 });
  const yaml = runKpng(['file', '--input', example, '--node', 'n1', '--once', '--to', 'dump', '--format', 'yaml']);
  expect(yaml.stdout).toMatch(/^---\nnode: n1\nrevision: 1\nitems:\n/);
});

test('usage errors exit 2 with a clear message; --help explains', () => {
  const bad = runKpng(['file', '--input', example, '--to', 'nowhere']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--to "nowhere": expected one of routes, dump, trace, nft, ipvs, ebpf, api/);
  expect(runKpng(['file']).stderr).toMatch(/kpng file needs --input FILE/);
  expect(runKpng(['file', '--input', example, '--format', 'yaml']).stderr).toMatch(/--format "yaml" does not apply to --to routes \(use table or jsonl\)/);
  const help = runKpng(['--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/kpng file\s+--input FILE/);
});

test('a file that cannot be read or parsed is a clear error', () => {
  expect(runKpng(['file', '--input', path.join(dir, 'nope.yaml'), '--once']).stderr).toMatch(/cannot read .*nope.yaml: ENOENT/);
  fs.writeFileSync(path.join(dir, 'bad.yaml'), 'kind: [');
  const r = runKpng(['file', '--input', path.join(dir, 'bad.yaml'), '--once']);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/bad.yaml: not valid YAML or JSON/);
});

test('follows the file when it is rewritten in place and when a new file is renamed over it', async () => {
  const file = path.join(dir, 'state.yaml');
  const web = svc('web');
  writeList(file, [node('n1'), web, slice('web-1', 'web', [ep('10.244.1.1')])]);
  const p = new KpngProcess(['file', '--input', file, '--node', 'n1', '--to', 'trace', '--min-sync-period', '0']);
  try {
    await p.waitForLine(/^sync rev=1 changes=2$/, { stream: 'stdout' });
    expect(p.stdout).toEqual(['reset', 'set node node n1 zone=- addresses=192.168.50.1', 'set svc/default/web ClusterIP 80/TCP cluster-ip=cluster[10.244.1.1:8080]', 'sync rev=1 changes=2']);

    // Rewrite in place: an endpoint is added.
    let from = p.stdout.length;
    writeList(file, [node('n1'), web, slice('web-1', 'web', [ep('10.244.1.1'), ep('10.244.1.2')])]);
    await p.waitForLine(/^sync rev=2 changes=1$/, { from, stream: 'stdout' });
    expect(p.stdout.slice(from)).toEqual(['set svc/default/web ClusterIP 80/TCP cluster-ip=cluster[10.244.1.1:8080,10.244.1.2:8080]', 'sync rev=2 changes=1']);

    // Replace: a new file renamed over the old one, without the service.
    from = p.stdout.length;
    const tmp = path.join(dir, '.state.yaml.tmp');
    writeList(tmp, [node('n1')]);
    fs.renameSync(tmp, file);
    await p.waitForLine(/^sync rev=3 changes=1$/, { from, stream: 'stdout' });
    expect(p.stdout.slice(from)).toEqual(['delete svc/default/web', 'sync rev=3 changes=1']);

    // A broken rewrite keeps the previous state and says so.
    fs.writeFileSync(file, 'kind: [');
    await new Promise((r) => setTimeout(r, 400));
    expect(p.text('stderr')).toMatch(/not valid YAML or JSON.*keeping the previous state/);
    from = p.stdout.length;
    writeList(file, [node('n1'), svc('api', { clusterIPs: ['10.96.0.5'] })]);
    await p.waitForLine(/^sync rev=4 changes=1$/, { from, stream: 'stdout' });
  } finally {
    expect(await p.stop()).toBe(0);
  }
});

test('--stats prints a header and one line a second on stderr', async () => {
  const p = new KpngProcess(['file', '--input', example, '--node', 'n1', '--to', 'trace', '--stats']);
  try {
    await p.waitForLine(/^sync rev=1/, { stream: 'stdout' });
    await new Promise((r) => setTimeout(r, 2300));
  } finally {
    await p.stop();
  }
  const stats = p.stderr.filter((l) => l.startsWith('stats:'));
  expect(stats[0]).toBe('stats: time events rev usr-cpu sys-cpu tot-cpu mem revs/events');
  expect(stats.length).toBeGreaterThanOrEqual(3);
  expect(stats[1]).toMatch(/^stats: \d+ 11 1 \d+ \d+ \d+\.\d\d% \d+\.\dMiB 9\.09%$/);
});

test('--help lists the registered backends with their flags; model flags are validated', () => {
  const help = runKpng(['--help']);
  expect(help.stdout).toMatch(/registered: routes, dump, trace, nft, ipvs, ebpf\b/);
  expect(help.stdout).toMatch(/--nft-table NAME\s+name of kpng's table/);
  const cidr = runKpng(['file', '--input', example, '--cluster-cidr', '10.244.0.0/33', '--once']);
  expect(cidr.code).toBe(2);
  expect(cidr.stderr).toMatch(/--cluster-cidr: "10.244.0.0\/33" is not a CIDR/);
  const npa = runKpng(['file', '--input', example, '--nodeport-addresses', 'primary,10.0.0.0/8,primary', '--once']);
  expect(npa.stderr).toMatch(/--nodeport-addresses: "primary" is given twice/);
  const mode = runKpng(['file', '--input', example, '--detect-local-mode', 'Foo', '--once']);
  expect(mode.code).toBe(2);
  expect(mode.stderr).toMatch(/--detect-local-mode "Foo": expected ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix/);
  const bridge = runKpng(['file', '--input', example, '--detect-local-mode', 'BridgeInterface', '--once']);
  expect(bridge.stderr).toMatch(/--pod-bridge-interface: required with --detect-local-mode BridgeInterface/);
  const other = runKpng(['file', '--input', example, '--nft-table', 'x', '--once']);
  expect(other.stderr).toMatch(/--nft-table applies to --to nft, not --to routes/);
});

test('a third-party backend registers through --plugin and gets its own flags (examples/plugin-backend.ts)', () => {
  const plugin = path.join(ROOT, 'dist', 'examples', 'plugin-backend.js');
  const help = runKpng(['--plugin', plugin, '--help']);
  expect(help.stdout).toMatch(/endpoint-count\s+example plugin/);
  expect(help.stdout).toMatch(/--count-format text\|json/);
  const r = runKpng(['file', '--input', example, '--node', 'n1', '--plugin', plugin, '--to', 'endpoint-count', '--count-format', 'json', '--once']);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout.trim())).toEqual({ revision: 1, counts: { 'default/api:8000': 0, 'default/web:80': 2, 'kube-system/dns:53': 4, 'shop/front:443': 2 } });
  const missing = runKpng(['--plugin', path.join(dir, 'nope.js'), '--help']);
  expect(missing.code).toBe(2);
  expect(missing.stderr).toMatch(/--plugin .*nope.js: Cannot find module/);
});

test('the memory-reducing GC waits for the first sync, even when that sync is slow and idle; Maglev comes after it', async () => {
  // A backend whose first sync waits 2.5 s without work (as a kernel sync waits on the addon's thread):
  // the idle check must not fire the GC inside it.
  const plugin = path.join(dir, 'slow-first.js');
  fs.writeFileSync(plugin, `
const { registerBackend } = require(${JSON.stringify(path.join(ROOT, 'dist', 'src', 'index'))});
let first = true;
registerBackend({ name: 'slow-first', summary: 'test: a slow first sync', flags: [], create(ctx) {
  return { name: 'slow-first', async apply(batch) {
    if (first) { first = false; await new Promise((r) => setTimeout(r, 2500)); }
    ctx.log.info('slow-first: applied revision ' + batch.revision);
  } };
} });
`);
  const p = new KpngProcess(['file', '--input', example, '--node', 'n1', '--plugin', plugin, '--to', 'slow-first', '--log-level', 'debug']);
  try {
    const deadline = Date.now() + 15_000;
    while (!/jit: Maglev on/.test(p.text('stderr')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  } finally {
    await p.stop();
  }
  const lines = p.stderr;
  const applied = lines.findIndex((l) => l.includes('slow-first: applied revision 1'));
  const gc = lines.findIndex((l) => /memory: resident set \d+ -> \d+ MiB after the first sync/.test(l));
  expect(applied).toBeGreaterThanOrEqual(0);
  expect(gc).toBeGreaterThan(applied);
  // Then Maglev for the steady state (the optimizing compilers were deferred: a small cluster).
  const maglev = lines.findIndex((l) => l.includes('jit: Maglev on for the steady state'));
  expect(maglev).toBeGreaterThan(gc);
}, 30_000);

// `make demo`: kpng on the built-in example cluster (examples/cluster.yaml), start to finish,
// ending with a summary. Each step runs the real `kpng` command.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { messagesAt } from '../test/helpers/klog';

const root = path.resolve(__dirname, '..', '..');
const kpng = path.join(root, 'dist', 'src', 'cli', 'main.js');
const example = path.join(root, 'examples', 'cluster.yaml');
const say = (s = '') => process.stdout.write(s + '\n');
const indent = (s: string) => s.trimEnd().split('\n').map((l) => '    ' + l).join('\n');

function step(title: string, args: string[]): { stdout: string; stderr: string } {
  say(`\n== ${title}\n   $ kpng ${args.join(' ')}`);
  const r = spawnSync(process.execPath, [kpng, ...args], { encoding: 'utf8' });
  if (r.stdout.trim()) say(indent(r.stdout));
  if (r.stderr.trim()) say(indent(r.stderr));
  if (r.status !== 0) throw new Error(`kpng exited with ${r.status}`);
  return r;
}

async function follow(dir: string): Promise<{ trace: string[]; revisions: number; events: string; edits: number }> {
  const file = path.join(dir, 'cluster.yaml');
  const doc = parse(fs.readFileSync(example, 'utf8'));
  fs.writeFileSync(file, stringify(doc));
  say(`\n== kpng follows a file as it changes (trace sink: every Set / Delete / Sync)\n   $ kpng file --input ${file} --node n1 --to trace --min-sync-period 0 --stats`);
  const child = spawn(process.execPath, [kpng, 'file', '--input', file, '--node', 'n1', '--to', 'trace', '--min-sync-period', '0', '--stats']);
  const trace: string[] = [];
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => trace.push(...d.split('\n').filter(Boolean)));
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const waitSync = async (n: number) => {
    for (let i = 0; i < 100 && trace.filter((l) => l.startsWith('sync ')).length < n; i++) await new Promise((r) => setTimeout(r, 50));
  };
  await waitSync(1);
  const items = doc.items as Record<string, any>[];
  const edits: [string, () => void][] = [
    ['a pod of default/web becomes ready on n2', () => { items.find((o) => o.metadata.name === 'web-abc12')!.endpoints.push({ addresses: ['10.244.2.9'], conditions: { ready: true }, nodeName: 'n2' }); }],
    ['labels and annotations change on every service (nothing a proxy needs)', () => { for (const o of items) if (o.kind === 'Service') o.metadata.annotations = { 'demo/touched': String(Date.now()) }; }],
    ['shop/front loses its only local endpoint (externalTrafficPolicy Local)', () => { items.find((o) => o.metadata.name === 'front-x1')!.endpoints.shift(); }],
    ['default/api is deleted', () => { doc.items = items.filter((o) => !(o.kind === 'Service' && o.metadata.name === 'api')); }],
  ];
  let syncs = 1;
  for (const [what, edit] of edits) {
    const before = trace.length;
    edit();
    fs.writeFileSync(file, stringify(doc));
    await new Promise((r) => setTimeout(r, 400));
    await waitSync(syncs + 1);
    const got = trace.slice(before);
    if (got.some((l) => l.startsWith('sync '))) syncs++;
    say(`   -- ${what}:`);
    say(got.length ? indent(got.join('\n')) : '    (no change for this node: no revision, nothing sent)');
  }
  await new Promise((r) => setTimeout(r, 1100));
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  const statsLines = stderr.split('\n').filter((l) => l.startsWith('stats:'));
  return { trace, revisions: syncs, events: statsLines[statsLines.length - 1] ?? '', edits: edits.length };
}

interface PacketsResult { lines: string[]; ok: number; total: number }

/** Act 3, as root with the addon built: kpng programs nftables on a node made of network namespaces. */
async function packets(): Promise<PacketsResult | null> {
  if (process.getuid?.() !== 0) { say('\n== Real packets: skipped (needs root for network namespaces)'); return null; }
  if (!fs.existsSync(path.join(root, 'build', 'Release', 'kpng_native.node'))) { say('\n== Real packets: skipped (native addon not built)'); return null; }
  // The lab is the e2e tests' own (test/e2e/lab): a node n1 with two pods, a node n2 with two, an outside client.
  const { Lab, ADDR } = require('../test/e2e/lab/lab') as typeof import('../test/e2e/lab/lab');
  const { Kpng } = require('../test/e2e/lab/kpng') as typeof import('../test/e2e/lab/kpng');
  const { StateFile } = require('../test/e2e/lab/world') as typeof import('../test/e2e/lab/world');
  say('\n== Real packets: kpng programs nftables on node n1 (network namespaces: 2 nodes, 4 pods, an outside client)');
  say(`   $ ip netns exec n1 kpng file --input state.yaml --node n1 --to nft --cluster-cidr ${ADDR.clusterCidr4}`);
  const lab = await Lab.create();
  const state = new StateFile();
  const res: PacketsResult = { lines: [], ok: 0, total: 0 };
  try {
    state.write([
      { name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }], pods: ['p1a', 'p1b', 'p2a', 'p2b'] },
      { name: 'local', type: 'NodePort', etp: 'Local', clusterIPs: ['10.96.0.50'], ports: [{ port: 80, targetPort: 8080, nodePort: 30050 }], pods: ['p1a', 'p2a'] },
      { name: 'empty', clusterIPs: ['10.96.0.40'], ports: [{ port: 80, targetPort: 8080 }], pods: [] },
    ]);
    const kpng = await Kpng.start(lab, state.file, { mode: 'cli' });
    const tries: [string, string, string, number, number][] = [
      ['from pod p1a to ClusterIP 10.96.0.10:80', lab.ns.p1a, '10.96.0.10', 80, 8],
      ['from the outside client to NodePort n1:30080', lab.ns.client, ADDR.n1.v4, 30080, 8],
      ['from outside to NodePort n1:30050 (externalTrafficPolicy Local)', lab.ns.client, ADDR.n1.v4, 30050, 4],
      ['from pod p1a to 10.96.0.40:80 (no endpoints)', lab.ns.p1a, '10.96.0.40', 80, 1],
    ];
    for (const [what, from, host, port, count] of tries) {
      const r = await lab.probe(from, 'tcp', host, port, count);
      res.total += r.length;
      const ok = r.filter((x) => x.ok);
      res.ok += ok.length;
      const by = [...new Set(ok.map((x) => `${x.name} saw client ${x.peer}`))].join('; ');
      const errs = [...new Set(r.filter((x) => !x.ok).map((x) => x.err))].join(', ');
      const line = `${what}: ${ok.length}/${r.length} answered${by ? ` — ${by}` : ''}${errs ? ` — ${errs}` : ''}`;
      res.lines.push(line);
      say(`   -- ${line}`);
    }
    say('   (a pod that lands on itself sees the node address: hairpin masquerade; outside traffic with');
    say('    externalTrafficPolicy Cluster is masqueraded; with Local the client address 192.168.50.100 is kept)');
    await kpng.stop();
  } finally {
    await lab.destroy();
  }
  return res;
}

async function main(): Promise<void> {
  if (!fs.existsSync(kpng)) throw new Error('kpng is not built: run make build');
  say('kpng demo: a service proxy computes, for one node, where each Service sends traffic');
  say(`(the expected node-local state, ENLS), from Services, EndpointSlices and Nodes. Input: ${path.relative(root, example)}`);
  const first = step('Routes for node n1 (zone-a) — a table for humans', ['file', '--input', example, '--node', 'n1', '--once']);
  const services = (parse(fs.readFileSync(example, 'utf8')).items as { kind: string }[]).filter((o) => o.kind === 'Service').length;
  const skipped = messagesAt(first.stderr, 'W').filter((m) => m.startsWith('skipping ')).map((m) => m.slice('skipping '.length));
  step('Same cluster seen from node n2: externalTrafficPolicy Local now picks n2\'s pod', ['file', '--input', example, '--node', 'n2', '--once', '--to', 'routes', '--format', 'jsonl']);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-demo-'));
  try {
    const f = await follow(dir);
    const p = await packets();
    const stat = f.events.split(' ');
    say('\n== Summary');
    say(`  - ${services} services in the file; ${skipped.length} skipped with a warning (${skipped.join('; ') || 'none'}), the others kept working.`);
    say(`  - ${f.edits} edits to the file: kpng sent ${f.revisions - 1} incremental syncs; an edit that changes nothing a proxy needs sends nothing.`);
    if (stat.length >= 9) say(`  - kpng read ${stat[2]} objects over ${f.edits + 1} loads and is at revision ${stat[3]}: ${stat[8]} of the objects read changed node n1's state; ${stat[7]} resident.`);
    if (p) say(`  - Real packets through kpng's nftables rules: ${p.ok} of ${p.total} connections answered (the no-endpoints service refuses, as it should).`);
    say('  - Next: `kpng kube --to nft` on a real node, `--to api` to serve this state over gRPC (see README).');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { process.stderr.write(`demo failed: ${(e as Error).message}\n`); process.exitCode = 1; });

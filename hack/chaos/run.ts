// `make chaos`: faults on the local cluster (hack/cluster/up.sh) while probes keep connecting and the
// endpoints keep changing, with kpng (nft or ebpf) or upstream kube-proxy deployed as
// hack/cluster/proxy.sh deploys it. A Markdown report per run goes to .cache/chaos-results/<backend>.md
// (docs/chaos.md).
//
//   node dist/hack/chaos/run.js [--backend nft|ebpf|upstream] [--scenarios a,b|all] [--short]
//                               [--no-deploy] [--keep-workload] [--out FILE]
//     --scenarios   scenario-list.ts names them (default: baseline, api-kill, api-partition, tamper-*)
//     --short       fewer rounds (proxy-kill: 3 instead of 20; baseline 10 s instead of 20)
//     --no-deploy   the proxy that is deployed stays (default: proxy.sh <backend> deploys it afresh)
// Needs root and a cluster that is up (make cluster); the cluster is left up.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Cluster, inNode, kubectl, now, openCluster, proxyPod, REPO, run, sleep } from './cluster';
import { OutsideProbes } from './outside';
import { summarize, type ProbeEvent } from './probes';
import { describeHealth, describeMetrics, parseMetrics } from './proxy-state';
import { renderRun, type RunResult, type ScenarioResult } from './report';
import type { Context, Scenario } from './scenario';
import { type Backend, parseBackend, parseScenarioList } from './scenario-list';
import { BY_NAME } from './scenarios';
import { Churn, clientEvents, deployWorkload, flipMarker, markerSliceAt, removeWorkload } from './workload';

interface Args { backend: Backend; scenarios?: string; short: boolean; deploy: boolean; keepWorkload: boolean; out?: string }

function parseArgs(argv: string[]): Args {
  const a: Args = { backend: 'nft', short: false, deploy: true, keepWorkload: false };
  for (let i = 0; i < argv.length; i++) {
    const f = argv[i];
    if (f === '--backend') a.backend = parseBackend(argv[++i]);
    else if (f === '--scenarios') a.scenarios = argv[++i];
    else if (f === '--short') a.short = true;
    else if (f === '--no-deploy') a.deploy = false;
    else if (f === '--keep-workload') a.keepWorkload = true;
    else if (f === '--out') a.out = argv[++i];
    else throw new Error(`unknown argument ${f} (see the header of hack/chaos/run.ts)`);
  }
  return a;
}

/** The checkout's commit, read from .git (no git process: others may be working in the tree). */
function headCommit(): string {
  try {
    const git = path.join(REPO, '.git');
    const head = fs.readFileSync(path.join(git, 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return head.slice(0, 7);
    const ref = head.slice(5);
    const loose = path.join(git, ref);
    if (fs.existsSync(loose)) return fs.readFileSync(loose, 'utf8').trim().slice(0, 7);
    const packed = fs.readFileSync(path.join(git, 'packed-refs'), 'utf8').split('\n').find((l) => l.endsWith(` ${ref}`));
    return packed ? packed.slice(0, 7) : 'unknown';
  } catch {
    return 'unknown';
  }
}

const say = (msg: string): void => { process.stdout.write(`chaos ${new Date().toISOString().slice(11, 23)}: ${msg}\n`); };

async function metrics(netns: string): Promise<Map<string, number> | undefined> {
  const r = await inNode(netns, ['curl', '-sf', '-m', '3', 'http://127.0.0.1:10249/metrics'], { allowFail: true });
  return r.code === 0 ? parseMetrics(r.stdout) : undefined;
}

async function proxyLog(c: Cluster, node: string, since: number, pattern: RegExp): Promise<{ matched: number; lines: string[] }> {
  const pod = await proxyPod(c, node);
  if (!pod) return { matched: 0, lines: ['(no proxy pod)'] };
  const r = await kubectl(c, ['-n', 'kube-system', 'logs', pod.name, '--all-containers=false', `--since-time=${new Date(since * 1000).toISOString()}`], { allowFail: true });
  const hits = r.stdout.split('\n').filter((l) => l && pattern.test(l));
  return { matched: hits.length, lines: hits.slice(0, 8).map((l) => (l.length > 240 ? `${l.slice(0, 240)}…` : l)) };
}

async function runScenario(s: Scenario, ctx: Context, events: () => ProbeEvent[]): Promise<ScenarioResult> {
  const { c } = ctx;
  const nodes = c.plan.nodes;
  const from = now();
  const before = new Map<string, Map<string, number> | undefined>();
  for (const n of nodes) before.set(n.name, await metrics(n.netns));
  await sleep(5000);
  say(`${s.info.name}: ${s.info.title}`);
  let fault;
  let error: string | undefined;
  try {
    fault = await s.run(ctx);
  } catch (e) {
    error = (e as Error).message;
    say(`${s.info.name}: ${error}`);
    fault = { faultAt: now(), figures: [] };
  }
  const end = fault.recoveredAt ?? now();
  await sleep(Math.max(0, end * 1000 + (fault.settleMs ?? 20_000) - Date.now()));
  const to = now();
  const all = [...(await clientEvents(c, from)), ...events().filter((e) => e.t >= from)];
  const result: ScenarioResult = {
    name: s.info.name, title: s.info.title, faultAt: fault.faultAt, from, to,
    ...(fault.recoveredAt !== undefined ? { recoveredAt: fault.recoveredAt } : {}),
    probes: summarize(all, from, to, fault.faultAt),
    figures: [...fault.figures, ...(fault.after ? await fault.after(all, to) : [])],
    health: [], metrics: [], logs: [],
    ...(error ? { error } : {}),
  };
  const duringTo = fault.recoveredAt ?? Math.max(fault.faultAt + 1, to - 10);
  for (const n of nodes) {
    result.health.push({ node: n.name, during: describeHealth(ctx.outside.health, n.name, fault.faultAt, duringTo), after: describeHealth(ctx.outside.health, n.name, to - 10, to) });
    result.metrics.push({ node: n.name, text: describeMetrics(before.get(n.name), await metrics(n.netns), now()) });
    result.logs.push({ node: n.name, ...(await proxyLog(c, n.name, from, s.logPattern)) });
  }
  return result;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const list = parseScenarioList(args.scenarios, args.backend);
  if (process.getuid?.() !== 0) throw new Error('needs root (network namespaces of the nodes)');
  const c = await openCluster();
  const proxy = args.backend === 'upstream' ? 'upstream kube-proxy (nftables mode)' : `kpng, ${args.backend} backend`;
  if (args.deploy) {
    if (args.backend !== 'upstream') await run(path.join(REPO, 'hack/cluster/images.sh'), [], { timeoutMs: 600_000 });
    say(`deploying ${proxy} (hack/cluster/proxy.sh ${args.backend})`);
    say((await run(path.join(REPO, 'hack/cluster/proxy.sh'), [args.backend], { timeoutMs: 600_000 })).stdout.trim());
  }
  say('deploying the workload (namespace chaos)');
  const { nodePort } = await deployWorkload(c);
  const outside = new OutsideProbes(c.plan.nodes.map((n) => ({ name: n.name, ip: n.ip })), nodePort);
  outside.start();
  const churn = new Churn(c);
  churn.start();
  let mark: 'a' | 'b' = 'a';
  const ctx: Context = {
    c, backend: args.backend, short: args.short, target: c.plan.nodes[0], nodePort, outside, say,
    scales: () => churn.scales,
    async flipMarker() {
      mark = mark === 'a' ? 'b' : 'a';
      const at = now();
      const pod = await flipMarker(c, mark);
      return { at, pod, sliceAt: markerSliceAt(c, pod) };
    },
  };
  await sleep(10_000);
  const commit = headCommit();
  const command = `make chaos BACKEND=${args.backend}${args.scenarios ? ` SCENARIOS=${args.scenarios}` : ''}${args.short ? ' SHORT=1' : ''}`;
  const report: RunResult = { proxy, command, startedAt: new Date(), commit, results: [] };
  const out = args.out ?? path.join(REPO, '.cache', 'chaos-results', `${args.backend}.md`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  for (const info of list) {
    const r = await runScenario(BY_NAME[info.name], ctx, () => outside.events);
    report.results.push(r);
    fs.writeFileSync(out, renderRun(report));
    say(`${info.name}: written to ${out}`);
  }
  outside.stop();
  await churn.stop();
  say(`churn: ${churn.ok} scale operations done, ${churn.failed} failed (API server away)`);
  if (!args.keepWorkload) await removeWorkload(c);
  process.stdout.write(`\n${renderRun(report)}`);
}

main().catch((e: Error) => {
  process.stderr.write(`chaos: ${e.message}\n`);
  process.exit(1);
});

// bench:scale — kpng against upstream kube-proxy under ClusterLoader2's load on a cluster with many
// kwok nodes (hack/cluster/up.sh --kwok-nodes N): network programming latency (the SLI, from the
// proxies' own histograms, as ClusterLoader2 computes it), the proxies' own share of it measured from
// outside, CPU, syscalls, kernel transactions, memory, API requests, and after every phase a check
// that each real node's kernel holds what the API says.
//
//   npm run bench:scale -- --proxies nft,ebpf,upstream --profile 100 [--runs 1] [--seed 1]
//        [--throughput 10] [--phases create,scale,update,delete] [--out DIR] [--kubeconfig FILE]
//        [--no-deploy] [--check-timeout 120]
//   npm run bench:scale -- --lab --proxies nft,upstream,nft:--min-change-period=0s --profile 100
//
// --profile: ClusterLoader2's node count (tiny = 20, 100, 1000, 5000) or --nodes N; the load is sized
//   for that many nodes (30 pods a node) and runs on the kwok nodes, of which there must be enough
//   (56 pods each, from a /26 of pod addresses).
// --proxies: deployed one after the other with hack/cluster/proxy.sh and the same KubeProxyConfiguration
//   (bench/scale/kube-proxy-config.yaml: kubeadm's defaults); with --runs N the order rotates from
//   run to run. --no-deploy measures whatever proxy the cluster runs (found by the label k8s-app=kpng
//   or kube-proxy), for a cluster of your own (KUBECONFIG); the kernel check and the process figures
//   then need the nodes' network namespaces on this host, else they are left out.
// --lab: no cluster (lab.ts): the loopback control plane, kube-controller-manager, kube-scheduler and
//   kwok (make scale-bins), each proxy in a network namespace as the one real node; kpng's entries may
//   carry extra flags after a `:`.
// Writes report.md, report.json and SVG plots to --out (default .cache/bench/scale/<profile>-<date>).
// Figures, never pass/fail.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { helpIfAsked } from '../help';
import { repoRoot } from '../../test/shared/kpng-process';
import { accessFromKubeconfig, Kube } from './kube';
import { planLoad, PHASES, type PhaseName } from './load-plan';
import { describeProfile, NAMED_PROFILES, profileFor } from './profile';
import { runProxy } from './run-proxy';
import { findProxies } from './targets';
import { writeReport, type Report } from './report';
import { runLab } from './lab';

helpIfAsked(__filename);

const CLUSTER_STATE = process.env.KPNG_CLUSTER_STATE || '/var/lib/kpng-cluster';
const PROXIES: Record<string, string> = { nft: 'nft', ebpf: 'ebpf', upstream: 'upstream' };

async function main(): Promise<void> {
  const { values: a } = parseArgs({
    options: {
      proxies: { type: 'string', default: 'nft,upstream' },
      profile: { type: 'string', default: '100' },
      nodes: { type: 'string' },
      runs: { type: 'string', default: '1' },
      seed: { type: 'string', default: '1' },
      throughput: { type: 'string', default: '10' },
      phases: { type: 'string', default: PHASES.join(',') },
      out: { type: 'string' },
      kubeconfig: { type: 'string' },
      'no-deploy': { type: 'boolean', default: false },
      lab: { type: 'boolean', default: false },
      'check-timeout': { type: 'string', default: '120' },
    },
  });
  const nodes = a.nodes ? Number(a.nodes) : NAMED_PROFILES[a.profile!];
  if (!nodes) throw new Error(`--profile ${a.profile}: not one of ${Object.keys(NAMED_PROFILES).join(', ')} (or give --nodes N)`);
  const profile = profileFor(nodes, Number(a.throughput));
  const seed = Number(a.seed);
  const phases = a.phases!.split(',') as PhaseName[];
  for (const p of phases) if (!PHASES.includes(p)) throw new Error(`--phases: ${p} is not one of ${PHASES.join(', ')}`);
  const log = (m: string) => process.stderr.write(`[scale] ${new Date().toISOString().slice(11, 19)} ${m}\n`);
  if (a.lab) {
    const plan = planLoad(profile, seed);
    const kwokNodes = Math.ceil(profile.pods / 56) + 2;
    const date = new Date().toISOString();
    const out = a.out ?? path.join(repoRoot(), '.cache', 'bench', 'scale', `lab-${profile.nodes}-${date.slice(0, 19).replace(/:/g, '')}`);
    const report: Report = { command: `npm run bench:scale -- ${process.argv.slice(2).join(' ')}`, date, profile: `${describeProfile(profile)} (lab: one real node)`, seed, kwokNodes, results: [] };
    log(`${describeProfile(profile)}; seed ${seed}; lab with ${kwokNodes} kwok nodes; proxies ${a.proxies}`);
    await runLab({ plan, kwokNodes, proxies: a.proxies!.split(','), runs: Number(a.runs), log,
      runOptions: { phases, checkTimeoutMs: Number(a['check-timeout']) * 1000 },
      onResult: (res) => {
        report.results.push(res);
        writeReport(out, report);
        log(`${res.proxy} run ${res.run}: SLI p99 ${res.sli.p99} s; own share p99 ${res.own.p99.toFixed(0)} ms (${res.own.count} samples); CPU ${res.cpuS.toFixed(1)} s; peak ${res.peakMiB.toFixed(0)} MiB; mismatches ${res.checks.map((c) => c.mismatches).join('/')}`);
      } });
    process.stdout.write(fs.readFileSync(path.join(out, 'report.md'), 'utf8'));
    log(`report: ${out}/report.md (and report.json, latency.svg, cpu.svg, rss.svg)`);
    return;
  }
  const local = fs.existsSync(path.join(CLUSTER_STATE, 'up'));
  const kubeconfig = a.kubeconfig ?? process.env.KUBECONFIG ?? (local ? path.join(CLUSTER_STATE, 'admin.kubeconfig') : undefined);
  const kube = new Kube(accessFromKubeconfig(kubeconfig));
  const proxies = a['no-deploy'] ? ['current'] : a.proxies!.split(',');
  for (const p of proxies) if (p !== 'current' && !PROXIES[p]) throw new Error(`--proxies: ${p} is not one of ${Object.keys(PROXIES).join(', ')}`);
  if (!a['no-deploy'] && !local) throw new Error(`no local cluster is up in ${CLUSTER_STATE} (make cluster KWOK_NODES=N), and --no-deploy was not given`);

  const kwokNodes = (await kube.list('/api/v1/nodes', 'labelSelector=type%3Dkwok')).items.length;
  const needed = Math.ceil(profile.pods / 56);
  if (kwokNodes < needed) throw new Error(`the load needs at least ${needed} kwok nodes (56 pods each); the cluster has ${kwokNodes} (hack/cluster/up.sh --kwok-nodes ${profile.nodes})`);
  const plan = planLoad(profile, seed);
  log(`${describeProfile(profile)}; seed ${seed}; ${kwokNodes} kwok nodes; proxies ${proxies.join(', ')}`);

  const config = path.join(repoRoot(), 'bench', 'scale', 'kube-proxy-config.yaml');
  const netnsOf = (node: string) => (local && fs.existsSync(`/run/netns/${node}`) ? node : undefined);
  const nodePidOf = (node: string) => {
    try { return local ? Number(fs.readFileSync(path.join(CLUSTER_STATE, 'pids', node), 'utf8')) || undefined : undefined; } catch { return undefined; }
  };
  const date = new Date().toISOString();
  const out = a.out ?? path.join(repoRoot(), '.cache', 'bench', 'scale', `${profile.nodes}-${date.slice(0, 19).replace(/:/g, '')}`);
  const report: Report = { command: `npm run bench:scale -- ${process.argv.slice(2).join(' ')}`, date, profile: describeProfile(profile), seed, kwokNodes, results: [] };
  const runs = Number(a.runs);
  for (let r = 0; r < runs; r++) {
    const order = proxies.map((_, i) => proxies[(i + r) % proxies.length]);
    for (const proxy of order) {
      if (proxy !== 'current') {
        log(`deploying ${proxy}`);
        execFileSync(path.join(repoRoot(), 'hack', 'cluster', 'proxy.sh'), [PROXIES[proxy], '--config', config], { stdio: ['ignore', 'inherit', 'inherit'] });
      }
      const targets = await findProxies(kube, netnsOf, nodePidOf);
      if (!targets.length) throw new Error('no proxy pod runs (label k8s-app=kpng or kube-proxy in kube-system)');
      log(`${proxy}: ${targets.map((t) => `${t.node} (${t.kind}${t.pid ? `, pid ${t.pid}` : ''})`).join(', ')}`);
      const res = await runProxy(kube, plan, proxy === 'current' ? targets[0].kind : proxy, r + 1, targets, { phases, checkTimeoutMs: Number(a['check-timeout']) * 1000, log });
      report.results.push(res);
      writeReport(out, report); // after every proxy: a later failure keeps what was measured
      log(`${proxy} run ${r + 1}: SLI p99 ${res.sli.p99} s; own share p99 ${res.own.p99.toFixed(0)} ms (${res.own.count} samples); CPU ${res.cpuS.toFixed(1)} s; peak ${res.peakMiB.toFixed(0)} MiB; mismatches ${res.checks.map((c) => c.mismatches).join('/')}`);
    }
  }
  kube.close();
  process.stdout.write(fs.readFileSync(path.join(out, 'report.md'), 'utf8'));
  log(`report: ${out}/report.md (and report.json, latency.svg, cpu.svg, rss.svg)`);
}

main().catch((e) => { process.stderr.write(`bench:scale: ${(e as Error).stack ?? e}\n`); process.exit(1); });

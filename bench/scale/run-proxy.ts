// One proxy through one load: the own-share sampler and the measurements start, the plan's phases run
// one after the other (operations on time, then the cluster settles, then every node's kernel is
// checked against the API), and the figures come back as one ProxyResult.
import { checkKernels, type CheckResult } from './check';
import { createNamespaces, removeLoad, runOperations, waitSettled } from './load';
import { RunMeasure } from './measure';
import { byPhase, windowed, type ProxyResult } from './report';
import { OwnShare } from './share';
import { quantiles } from './sli';
import { percentile } from '../vs-upstream/proc';
import type { Kube } from './kube';
import type { LoadPlan, PhaseName } from './load-plan';
import type { ProxyTarget } from './targets';

export interface RunOptions {
  phases?: PhaseName[];
  /** How long the cluster may take to settle after a phase's operations (default: the phase's length + 10 min). */
  settleTimeoutMs?: number;
  /** How long the kernels may take to match the API once the cluster has settled. */
  checkTimeoutMs?: number;
  concurrency?: number;
  sampleEveryMs?: number;
  log?: (m: string) => void;
}

export async function runProxy(kube: Kube, plan: LoadPlan, proxy: string, run: number, targets: ProxyTarget[], o: RunOptions = {}): Promise<ProxyResult> {
  const log = o.log ?? ((m: string) => process.stderr.write(`[scale] ${m}\n`));
  const share = new OwnShare(kube, targets);
  await share.start();
  const measure = new RunMeasure(kube, targets, o.sampleEveryMs ?? 10_000);
  await measure.begin();
  const failures: string[] = [];
  const checks: CheckResult[] = [];
  const phaseSeconds: Record<string, number> = {};
  try {
    await createNamespaces(kube, plan);
    for (const phase of plan.phases) {
      if (o.phases && !o.phases.includes(phase.name)) continue;
      const t0 = Date.now();
      log(`${proxy} run ${run}: ${phase.name}: ${phase.ops.length} operations over ${phase.timeLimit.toFixed(0)} s`);
      const r = await runOperations(kube, phase, o.concurrency ?? 16, log);
      failures.push(...r.failures);
      if (r.failures.length) log(`${proxy} run ${run}: ${phase.name}: ${r.failures.length} operation(s) failed, e.g. ${r.failures.slice(0, 3).join('; ')}`);
      await waitSettled(kube, plan, phase.name, o.settleTimeoutMs ?? phase.timeLimit * 1000 + 600_000, log);
      phaseSeconds[phase.name] = (Date.now() - t0) / 1000;
      const check = await checkKernels(kube, targets, phase.name, o.checkTimeoutMs ?? 120_000);
      checks.push(check);
      log(`${proxy} run ${run}: ${phase.name} settled after ${phaseSeconds[phase.name].toFixed(0)} s; kernel vs API: ${check.mismatches} mismatch(es) over ${check.servicePorts} service ports x ${check.nodes} node(s)${check.examples.length ? `, e.g. ${check.examples[0]}` : ''}`);
      await measure.mark(phase.name);
    }
  } catch (e) {
    await share.stop();
    await measure.end();
    throw e;
  }
  await share.stop();
  if (share.missed.length) log(`${proxy} run ${run}: ${share.missed.length} sampled address(es) never reached the kernel, e.g. ${share.missed.slice(0, 3).join('; ')}`);
  const end = await measure.end();
  await removeLoad(kube, plan);
  const ms = share.samples.map((s) => s.ms).sort((a, b) => a - b);
  const last = measure.marks[measure.marks.length - 1];
  return {
    proxy,
    run,
    nodes: targets.map((t) => t.node),
    seconds: end.seconds,
    sli: last ? quantiles(last.buckets) : quantiles(new Map()),
    sliByPhase: byPhase(measure.marks),
    own: { p50: percentile(ms, 50), p90: percentile(ms, 90), p99: percentile(ms, 99), count: ms.length, missed: share.missed.length, withdrawn: share.withdrawn },
    cpuS: last?.cpuS ?? NaN,
    syscallsPerS: end.syscalls / end.seconds,
    generations: last?.generations ?? NaN,
    apiRequests: last?.requests ?? NaN,
    peakMiB: measure.peakMiB,
    steadyMiB: end.steadyMiB,
    checks,
    phaseSeconds,
    failures,
    points: windowed(measure.points),
  };
}

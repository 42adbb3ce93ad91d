// The Markdown a run writes to .cache/chaos-results/<backend>.md: a summary row per scenario, then
// per scenario its probes, what /healthz, the metrics and the log said. Pure: test/chaos-report.test.ts.
import { type ProbeSummary, total } from './probes';

export interface ScenarioResult {
  name: string;
  title: string;
  /** Seconds since the epoch. */
  faultAt: number;
  /** When the fault ended (API server ready again, partition lifted, last kill), if it has an end. */
  recoveredAt?: number;
  from: number;
  to: number;
  probes: ProbeSummary[];
  /** Figures the scenario measured itself (catch-up, table re-created, pod ready again), in words. */
  figures: string[];
  health: { node: string; during: string; after: string }[];
  metrics: { node: string; text: string }[];
  logs: { node: string; matched: number; lines: string[] }[];
  /** Set when the scenario could not run to its end. */
  error?: string;
}

export interface RunResult {
  proxy: string;
  command: string;
  startedAt: Date;
  commit: string;
  results: ScenarioResult[];
}

export const secs = (s: number | undefined): string => (s === undefined ? '-' : `${s.toFixed(Math.abs(s) < 10 ? 2 : 1)} s`);
/** A time relative to the fault, signed ("+0.50 s"; "-0.02 s": an attempt begun just before it). */
export const rel = (s: number | undefined): string => (s === undefined ? '-' : `${s < 0 ? '' : '+'}${secs(s)}`);

/** "failed/attempted", the longest repair, "not repaired" when a probe ended failing. */
export function summaryCells(probes: ProbeSummary[]): { failed: string; repair: string } {
  const t = total(probes);
  const repair = t.unrepaired ? 'not repaired' : t.failed === 0 ? 'no failure' : secs(t.repair);
  return { failed: `${t.failed}/${t.attempted}`, repair };
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderRun(run: RunResult): string {
  const out: string[] = [];
  out.push(`# Chaos: ${run.proxy}`, '');
  out.push(`${run.startedAt.toISOString().replace(/\.\d+Z$/, 'Z')}, commit ${run.commit}; \`${run.command}\``, '');
  out.push('| scenario | failed/attempted | repair (from the fault) | figures |', '|---|---|---|---|');
  for (const r of run.results) {
    const c = summaryCells(r.probes);
    out.push(`| ${r.name} | ${c.failed} | ${r.error ? `error: ${cell(r.error)}` : c.repair} | ${cell(r.figures.join('; '))} |`);
  }
  for (const r of run.results) {
    out.push('', `## ${r.name}: ${r.title}`, '');
    const rec = r.recoveredAt === undefined ? '' : `, fault ended ${rel(r.recoveredAt - r.faultAt)}`;
    out.push(`Window ${secs(r.to - r.from)} (fault at ${rel(r.faultAt - r.from)}${rec}).${r.error ? ` Error: ${r.error}` : ''}`, '');
    out.push('| probe | attempted | failed | first failure | repair | failures said |', '|---|---|---|---|---|---|');
    for (const p of r.probes) {
      out.push(`| ${p.probe} | ${p.attempted} | ${p.failed} | ${rel(p.firstFailure)} | ${p.unrepaired ? 'not repaired' : secs(p.repair)} | ${cell(p.reasons ?? '')} |`);
    }
    if (r.figures.length) out.push('', ...r.figures.map((f) => `- ${f}`));
    out.push('');
    for (const h of r.health) out.push(`- /healthz ${h.node}: during ${h.during}; after ${h.after}`);
    for (const m of r.metrics) out.push(`- metrics ${m.node}: ${m.text}`);
    for (const l of r.logs) {
      out.push(`- log ${l.node}: ${l.matched} matching line${l.matched === 1 ? '' : 's'}${l.lines.length ? ':' : ''}`);
      for (const line of l.lines) out.push(`  - \`${line.replace(/`/g, "'")}\``);
    }
  }
  return `${out.join('\n')}\n`;
}

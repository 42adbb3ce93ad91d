// What the probes saw: each attempt is one event (when it started, which probe, ok or not), from the
// client pods' logs and from the runner's own NodePort prober. Pure functions: test/chaos-probes.test.ts.

export interface ProbeEvent {
  /** Seconds since the epoch when the attempt started (the host's clock: pods share it). */
  t: number;
  /** e.g. "pod@kc-node1 tcp", "host→kc-node1 NodePort". */
  probe: string;
  ok: boolean;
  /** Whatever the client said beside ok/fail (the marker probe: the pod that answered). */
  detail?: string;
}

/**
 * One line of a client pod's log: "<EPOCHREALTIME> <kind> ok|fail|<answer>" (hack/chaos/workload.ts).
 * The marker probe prints the name of the pod that answered instead of ok, "none" when none did.
 */
export function parseProbeLine(line: string, node: string): ProbeEvent | undefined {
  const m = /^(\d+(?:\.\d+)?) (tcp|udp|long|marker) (\S+)(?: (.*))?$/.exec(line.trim());
  if (!m) return undefined;
  const [, t, kind, word, rest] = m;
  const probe = `pod@${node} ${kind}`;
  if (kind === 'marker') return { t: Number(t), probe, ok: word !== 'none', detail: word };
  if (word !== 'ok' && word !== 'fail') return undefined;
  return { t: Number(t), probe, ok: word === 'ok', ...(rest ? { detail: rest } : {}) };
}

export interface ProbeSummary {
  probe: string;
  attempted: number;
  failed: number;
  /** Seconds after the fault of the first failure, if any. */
  firstFailure?: number;
  /**
   * Seconds from the fault to the first success after the last failure of the window: how long the
   * probe was broken for, counting from the fault. Undefined when nothing failed or it never recovered.
   */
  repair?: number;
  /** True when the window ends on a failure (not repaired within it). */
  unrepaired: boolean;
  /** What the failures said, most frequent first: "ECONNREFUSED ×3, timeout ×1". */
  reasons?: string;
}

/** Per probe, the attempts that started in [from, to); the fault at faultAt (seconds since the epoch). */
export function summarize(events: ProbeEvent[], from: number, to: number, faultAt: number): ProbeSummary[] {
  const by = new Map<string, ProbeEvent[]>();
  for (const e of events) {
    if (e.t < from || e.t >= to || e.probe.endsWith(' marker')) continue;
    const list = by.get(e.probe) ?? [];
    list.push(e);
    by.set(e.probe, list);
  }
  const out: ProbeSummary[] = [];
  for (const [probe, list] of [...by].sort(([a], [b]) => a.localeCompare(b))) {
    list.sort((a, b) => a.t - b.t);
    const fails = list.filter((e) => !e.ok);
    const s: ProbeSummary = { probe, attempted: list.length, failed: fails.length, unrepaired: false };
    if (fails.length > 0) {
      s.firstFailure = fails[0].t - faultAt;
      const count = new Map<string, number>();
      for (const f of fails) count.set(f.detail ?? 'fail', (count.get(f.detail ?? 'fail') ?? 0) + 1);
      s.reasons = [...count].sort((a, b) => b[1] - a[1]).map(([r, n]) => `${r} ×${n}`).join(', ');
      const last = fails[fails.length - 1];
      const back = list.find((e) => e.ok && e.t > last.t);
      if (back) s.repair = back.t - faultAt;
      else s.unrepaired = true;
    }
    out.push(s);
  }
  return out;
}

/** All probes together: failed and attempted, the longest repair, any left broken. */
export function total(sums: ProbeSummary[]): { attempted: number; failed: number; repair?: number; unrepaired: boolean } {
  const repairs = sums.map((s) => s.repair).filter((r): r is number => r !== undefined);
  return {
    attempted: sums.reduce((n, s) => n + s.attempted, 0),
    failed: sums.reduce((n, s) => n + s.failed, 0),
    ...(repairs.length ? { repair: Math.max(...repairs) } : {}),
    unrepaired: sums.some((s) => s.unrepaired),
  };
}

/**
 * Seconds from `since` to the first answer from pod `want` on the given node's marker probe (the
 * marker Service's endpoint changed: this is when that node's proxy had the change in its rules);
 * undefined if it never came before `to`.
 */
export function markerSeen(events: ProbeEvent[], node: string, want: string, since: number, to: number): number | undefined {
  const probe = `pod@${node} marker`;
  const hit = events.filter((e) => e.probe === probe && e.detail === want && e.t >= since && e.t < to).sort((a, b) => a.t - b.t)[0];
  return hit ? hit.t - since : undefined;
}

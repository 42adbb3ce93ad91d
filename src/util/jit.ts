// V8's optimizing compilers (Maglev and TurboFan) only once kpng has work that pays for them.
// On a small cluster they cost more memory than they save CPU: their compile zones, the code they
// emit, and their own machine code paged in from the node binary raise the peak resident set by
// tens of MiB, for the same first sync time. On a large cluster the JIT makes the full sync several
// times faster. So kpng starts with TurboFan off and Maglev restricted to the hottest code
// (START_MAGLEV_FLAGS: functions run 3,000 times, no inlining; the interpreter and the Sparkplug baseline compiler run the rest), and turns both fully on
// when the cluster grows past JIT_OBJECTS, or when the process keeps a core busy. Restricted, Maglev
// compiles little more than the first sync's per-element encoding and the lists' parsing, which
// makes a small cluster's first sync much quicker than with Maglev off at the same peak (with V8's
// thresholds it is barely quicker, at a higher peak). Maglev's own thresholds come back after the
// first sync (enableMaglev): the steady state's hot code then runs compiled, for less CPU under
// churn at a small cost in memory. V8 reads these flags at each tier-up decision, so setting them at
// run time takes effect for the code that gets hot afterwards.
import * as v8 from 'node:v8';
import type { Logger } from './log';
import { userNodeFlags } from './node-flags';

/** Services + EndpointSlices (or served items) from which the optimizing compilers are turned on. */
export const JIT_OBJECTS = 4000;
/** Share of one core, averaged over JIT_CPU_WINDOW_MS, from which they are turned on. */
export const JIT_CPU_SHARE = 0.25;
export const JIT_CPU_WINDOW_MS = 30_000;

export type JitMode = 'adaptive' | 'on';
export const JIT_MODES: readonly JitMode[] = ['adaptive', 'on'];

/** Maglev for the start: only code run thousands of times, compiled without inlining (see above). */
export const START_MAGLEV_FLAGS = ['--invocation-count-for-maglev=3000', '--no-maglev-inlining'];
/** V8's own values of those (V8 13.6, Node 24), for the steady state. */
export const DEFAULT_MAGLEV_FLAGS = ['--invocation-count-for-maglev=400', '--maglev-inlining'];

/** Compiler flags a user may pass (node command line or NODE_OPTIONS): theirs win over ours. */
const COMPILER_FLAG = /--(no[-_])?(opt|maglev|turbofan|jitless|lite[-_]mode|max[-_]lite[-_]mode)\b|--invocation[-_]count[-_]for[-_]maglev\b/;

type SetFlags = (flags: string) => void;

/**
 * Turns TurboFan off and restricts Maglev to the hottest code until enableMaglev() or
 * enableOptimizingCompilers(). Returns false (and changes nothing) when the user chose compiler
 * flags, or V8 refused.
 */
export function deferOptimizingCompilers(userFlags = userNodeFlags(), setFlags: SetFlags = v8.setFlagsFromString): boolean {
  if (COMPILER_FLAG.test(userFlags)) return false; // --maglev-inlining matches --maglev
  try {
    setFlags('--no-opt');
    for (const f of START_MAGLEV_FLAGS) setFlags(f);
    return true;
  } catch {
    return false;
  }
}

let deferred = false;

/** Whether deferOptimizingCompilersFor() turned the compilers off (and nothing turned them on since). */
export function optimizingCompilersDeferred(): boolean { return deferred; }

/**
 * At process start, from the raw command line (before it is parsed): defers the compilers unless
 * `--jit on` or `--to api` is asked for (a --jit value main() rejects later changes nothing here).
 */
export function deferOptimizingCompilersFor(argv: string[]): boolean {
  const value = (flag: string) => {
    const i = argv.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
    return i < 0 ? undefined : argv[i].startsWith(`${flag}=`) ? argv[i].slice(flag.length + 1) : argv[i + 1];
  };
  if (value('--jit') === 'on' || value('--to') === 'api') return false;
  deferred = deferOptimizingCompilers();
  return deferred;
}

/**
 * Maglev, V8's mid-tier compiler, with its own thresholds (TurboFan stays off until
 * enableOptimizingCompilers()), when the compilers are deferred: for the steady state after the first
 * sync. Returns whether it did.
 */
export function enableMaglev(setFlags: SetFlags = v8.setFlagsFromString): boolean {
  if (!deferred) return false;
  try {
    for (const f of DEFAULT_MAGLEV_FLAGS) setFlags(f);
    return true;
  } catch {
    return false;
  }
}

export function enableOptimizingCompilers(setFlags: SetFlags = v8.setFlagsFromString): void {
  for (const f of DEFAULT_MAGLEV_FLAGS) setFlags(f);
  setFlags('--opt');
  deferred = false;
}

export interface JitPolicyOptions {
  log: Logger;
  signal: AbortSignal;
  /** How many objects kpng holds now (services + EndpointSlices, or items served). */
  objects: () => number;
  /** Process CPU time so far, ms (tests pass their own). */
  cpuMs?: () => number;
  now?: () => number;
  setFlags?: SetFlags;
  checkMs?: number;
  objectThreshold?: number;
  cpuShare?: number;
  windowMs?: number;
}

export interface JitPolicy {
  /** Resolves with the reason the compilers were turned on, or null if stopped first. */
  readonly done: Promise<string | null>;
  /** Checks the object count now (a source calls it as objects arrive); true once the compilers are on. */
  check(): boolean;
}

/**
 * Turns the optimizing compilers on the first time the object count reaches the threshold (checked
 * every `checkMs` and whenever check() is called), or the CPU used over the last `windowMs` reaches
 * `cpuShare` of one core; then stops checking.
 */
export function optimizeWhenBusy(o: JitPolicyOptions): JitPolicy {
  const cpuMs = o.cpuMs ?? (() => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; });
  const now = o.now ?? (() => performance.now());
  const threshold = o.objectThreshold ?? JIT_OBJECTS;
  const share = o.cpuShare ?? JIT_CPU_SHARE;
  const windowMs = o.windowMs ?? JIT_CPU_WINDOW_MS;
  // CPU samples over the window: the oldest is the reference once the window is covered.
  const samples: { t: number; cpu: number }[] = [{ t: now(), cpu: cpuMs() }];
  let finished = false;
  let resolve!: (r: string | null) => void;
  const done = new Promise<string | null>((r) => { resolve = r; });
  const finish = (reason: string | null) => {
    if (finished) return;
    finished = true;
    clearInterval(timer);
    o.signal.removeEventListener('abort', onAbort);
    if (reason !== null) {
      try {
        enableOptimizingCompilers(o.setFlags);
        o.log.info(`jit: optimizing compilers on: ${reason}`);
      } catch (e) {
        o.log.warn(`jit: could not turn the optimizing compilers on: ${(e as Error).message}`);
      }
    }
    resolve(reason);
  };
  const onAbort = () => finish(null);
  const check = (): boolean => {
    if (finished) return true;
    const n = o.objects();
    if (n >= threshold) finish(`${n} objects (threshold ${threshold})`);
    return finished;
  };
  const timer = setInterval(() => {
    if (check()) return;
    const t = now(), cpu = cpuMs();
    samples.push({ t, cpu });
    while (samples.length > 2 && t - samples[1].t >= windowMs) samples.shift();
    if (t - samples[0].t < windowMs) return;
    const used = (cpu - samples[0].cpu) / (t - samples[0].t);
    if (used >= share) finish(`${Math.round(used * 100)}% of a core over the last ${Math.round((t - samples[0].t) / 1000)} s (threshold ${Math.round(share * 100)}%)`);
  }, o.checkMs ?? 1000);
  timer.unref();
  o.signal.addEventListener('abort', onAbort, { once: true });
  return { done, check };
}

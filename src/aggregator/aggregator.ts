// The aggregator: several producers' nftables objects committed together. Each producer declares
// what it wants (its own tables, in the addon's NftOp vocabulary); per tick the aggregator diffs each
// producer's desired state against what it applied and sends ALL producers' changes as ONE netlink
// transaction, at most `burst` back to back then one per `minIntervalMs`. When the kernel refuses
// the batch, the failing ops are mapped back to their producers: everyone else's changes are
// committed without them in the same tick, the culprit is told which object failed and why, and it
// is retried later with a full resync of its own tables only. A producer's table changed by another
// process (`nft delete table`, `nft flush ruleset`, a rule inserted) is rebuilt at the next tick.
import type { NftApplyError, NftFailure, NftOp } from '../native/nft-types';
import { describeChanges, type NftForeignCommit, type NftTableChange } from '../native/nft-monitor';
import { diffStates, type Scope } from './diff';
import { CommitBudget } from './rate';
import { applyOps, checkOps, countObjects, opTable, tableKey, type Ruleset } from '../nft/ruleset';
import type { NftTransport } from '../nft/transport';
import { IpvsBatcher, type IpvsProducerStatus, type IpvsTransport } from './ipvs';

/** One producer's tables: what it wants (desired), or what the aggregator committed for it (applied). */
export type ProducerState = Ruleset;

/** A refusal of an op list before anything changed (bad reference, unsupported feature, ownership). */
export class DeclarationError extends Error {
  constructor(readonly producer: string, readonly index: number, reason: string) {
    super(`producer ${producer}: op #${index}: ${reason}`);
    this.name = 'DeclarationError';
  }
}

/** The aggregator's own rule on what producers declare (the kernel would take flowtables). */
const noFlowtables = (o: NftOp): string | undefined => ('flowtable' in o ? 'flowtables are not supported by the aggregator' : undefined);

export interface AggregatorOptions {
  transport: NftTransport;
  /** IPVS, the second subsystem (same minIntervalMs and burst, its own budget); absent: none. */
  ipvs?: IpvsTransport;
  /** Minimum time between commits once the burst is spent (default 100 ms). */
  minIntervalMs?: number;
  /** Commits allowed back to back (default 3). */
  burst?: number;
  /** First retry delay of a refused producer, doubled per refusal up to maxRetryMs (default 1 s / 30 s). */
  retryMs?: number;
  maxRetryMs?: number;
  log?: (msg: string) => void;
}

/** What a producer learns when its change is in the kernel. */
export interface CommitInfo {
  /** The aggregator's transaction number that carried the change (0: nothing to send yet). */
  commit: number;
  /** This producer's ops in that transaction (0 when its change was already in place). */
  ops: number;
  /** The whole transaction's netlink messages, bytes, and time in the addon. */
  messages: number;
  bytes: number;
  ms: number;
}

/** One object of a producer the kernel refused; `index` is within the ops of that producer. */
export type ProducerFailure = NftFailure;

/** A producer's change did not reach the kernel; nothing of it was applied. */
export class ProducerRefused extends Error {
  constructor(readonly producer: string, readonly failures: ProducerFailure[], detail?: string) {
    const f = failures[0];
    super(f
      ? `producer ${producer}: the kernel refused ${f.op} ${f.object}${f.element !== undefined ? ` element #${f.element}` : ''}: ` +
        `${f.code}${f.message ? ` (${f.message})` : ''}${failures.length > 1 ? ` (+${failures.length - 1} more)` : ''}`
      : `producer ${producer}: the kernel refused its changes: ${detail ?? 'unknown error'}`);
    this.name = 'ProducerRefused';
  }
}

export type ProducerEvent =
  | { kind: 'committed'; info: CommitInfo }
  | { kind: 'refused'; error: ProducerRefused; retryInMs: number };

export interface ProducerStatus {
  name: string;
  connected: boolean;
  peer?: string;
  tables: string[];
  desired: ReturnType<typeof countObjects>;
  applied: ReturnType<typeof countObjects>;
  last?: { at: string; ok: boolean; commit: number; error?: string };
  retryInMs?: number;
  /** Its IPVS messages, when it sent any. */
  ipvs?: IpvsProducerStatus;
}

interface Waiter { resolve(i: CommitInfo): void; reject(e: Error): void }

interface Producer {
  name: string;
  peer?: string;
  connected: boolean;
  desired: ProducerState;
  applied: ProducerState;
  /** What changed since the last commit, per table; `replace`: tables to rebuild as a whole. */
  dirty: Map<string, Scope>;
  replace: Set<string>;
  /** Rebuild every table of this producer at its next commit (after a refusal). */
  resync: boolean;
  retryAt: number;
  refusals: number;
  waiters: Waiter[];
  listeners: Set<(e: ProducerEvent) => void>;
  last?: ProducerStatus['last'];
  removing?: Waiter[];
}

interface Part { p: Producer; ops: NftOp[]; waiters: Waiter[] }

/** A connected producer's handle. */
export interface ProducerHandle {
  readonly name: string;
  /** Replaces this producer's whole desired state by what `ops` build from nothing. */
  declare(ops: NftOp[], opts?: { resync?: boolean }): Promise<CommitInfo>;
  /** Changes the desired state incrementally (a `delete` of a table rebuilds that table as a whole). */
  apply(ops: NftOp[]): Promise<CommitInfo>;
  /** What this producer declared so far (its desired state; read only). */
  readonly desired: ProducerState;
  /** Commit results, including retries after a refusal. Returns an unsubscribe function. */
  on(listener: (e: ProducerEvent) => void): () => void;
  /** Leaves: the producer's objects stay in the kernel until it declares again or is removed. */
  disconnect(): void;
}

export class Aggregator {
  private readonly producers = new Map<string, Producer>();
  /** Table key -> owning producer. */
  private readonly owners = new Map<string, string>();
  private readonly budget: CommitBudget;
  private timer?: NodeJS.Timeout;
  private running = false;
  private paused = false;
  private closed = false;
  private readonly log: (m: string) => void;
  /** repairs: producers' tables found changed by another process (or notifications lost) and rebuilt. */
  readonly stats = { commits: 0, refusedBatches: 0, messages: 0, bytes: 0, ops: 0, repairs: 0 };
  /** IPVS messages, batched per tick (when the aggregator was given an IPVS transport). */
  readonly ipvs?: IpvsBatcher;

  constructor(private readonly opts: AggregatorOptions) {
    this.budget = new CommitBudget(opts.minIntervalMs ?? 100, opts.burst ?? 3, Date.now());
    this.log = opts.log ?? (() => {});
    if (opts.ipvs) this.ipvs = new IpvsBatcher({ transport: opts.ipvs, minIntervalMs: opts.minIntervalMs, burst: opts.burst, log: this.log });
    this.watch();
  }

  /** Watches other processes' nftables commits, when the transport can (otherwise tampering stays until the producer resyncs). */
  private watch(): void {
    if (!this.opts.transport.watchForeign) return;
    try {
      this.opts.transport.watchForeign((c) => this.onForeign(c));
    } catch (e) {
      this.log(`aggregator: cannot watch nftables changes (${(e as Error).message}): producers' tables changed by others are repaired at their next resync only`);
    }
  }

  private onForeign(c: NftForeignCommit): void {
    if (this.closed) return;
    if (c.overflow) {
      const all = [...this.producers.values()].filter((p) => p.applied.size > 0);
      for (const p of all) p.resync = true;
      if (all.length > 0) {
        this.stats.repairs++;
        this.log(`aggregator: nftables change notifications were lost (socket buffer overflow): rebuilding the tables of ${all.map((p) => p.name).join(', ')}`);
      }
      this.schedule();
      return;
    }
    // Tables per producer that owns them and has applied them.
    const hit = new Map<Producer, { keys: Set<string>; changes: NftTableChange[] }>();
    for (const ch of c.changes) {
      const k = tableKey(ch.family, ch.table);
      const p = this.producers.get(this.owners.get(k) ?? '');
      if (!p || !p.applied.has(k)) continue;
      const h = hit.get(p) ?? { keys: new Set<string>(), changes: [] };
      h.keys.add(k);
      h.changes.push(ch);
      hit.set(p, h);
    }
    for (const [p, h] of hit) {
      for (const k of h.keys) p.replace.add(k);
      this.stats.repairs++;
      this.log(`aggregator: ${[...h.keys].map((k) => `table ${k}`).join(', ')} of producer ${p.name} changed by another process ` +
        `(pid ${c.pid}${c.comm ? ` ${c.comm}` : ''}: ${describeChanges(h.changes)}): rebuilding it`);
    }
    if (hit.size > 0) this.schedule();
  }

  connect(name: string, info: { peer?: string } = {}): ProducerHandle {
    if (this.closed) throw new Error('aggregator closed');
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(name)) throw new Error(`producer name ${JSON.stringify(name)}: letters, digits, '.', '_', '-'`);
    let p = this.producers.get(name);
    if (p?.connected) throw new Error(`producer ${name} is already connected`);
    if (p?.removing) throw new Error(`producer ${name} is being removed`);
    if (!p) {
      p = {
        name, connected: false, desired: new Map(), applied: new Map(), dirty: new Map(), replace: new Set(),
        resync: false, retryAt: 0, refusals: 0, waiters: [], listeners: new Set(),
      };
      this.producers.set(name, p);
    }
    p.connected = true;
    p.peer = info.peer;
    this.log(`aggregator: producer ${name} connected${info.peer ? ` (${info.peer})` : ''}`);
    const prod = p;
    const live = () => { if (!prod.connected || this.producers.get(name) !== prod) throw new Error(`producer ${name} is disconnected`); };
    return {
      name,
      declare: (ops, o) => { try { live(); return this.change(prod, ops, true, !!o?.resync); } catch (e) { return Promise.reject(e); } },
      apply: (ops) => { try { live(); return this.change(prod, ops, false, false); } catch (e) { return Promise.reject(e); } },
      on: (l) => { prod.listeners.add(l); return () => prod.listeners.delete(l); },
      get desired() { return prod.desired; },
      disconnect: () => {
        if (!prod.connected) return;
        prod.connected = false;
        prod.listeners.clear();
        this.log(`aggregator: producer ${name} disconnected; its ${prod.applied.size} table(s) stay`);
      },
    };
  }

  /** Deletes a producer's tables from the kernel and forgets it. */
  remove(name: string): Promise<void> {
    const p = this.producers.get(name);
    if (!p) return Promise.reject(new Error(`no producer ${name}`));
    p.connected = false;
    p.listeners.clear();
    for (const k of p.desired.keys()) p.dirty.set(k, 'all');
    p.desired = new Map();
    p.retryAt = 0;
    return new Promise<void>((resolve, reject) => {
      (p.removing ??= []).push({ resolve: () => resolve(), reject });
      this.schedule();
    });
  }

  /** Hold commits (changes accumulate) until resume(). */
  pause(): void { this.paused = true; if (this.timer) { clearTimeout(this.timer); this.timer = undefined; } }
  resume(): void { this.paused = false; this.schedule(); }

  /** Producers with changes not yet sent to the kernel. */
  pendingProducers(): string[] {
    return [...this.producers.values()].filter((p) => this.hasChanges(p)).map((p) => p.name);
  }

  status(): ProducerStatus[] {
    const now = Date.now();
    const ipvs = this.ipvs?.status() ?? new Map<string, IpvsProducerStatus>();
    const none = countObjects(new Map());
    const out: ProducerStatus[] = [...this.producers.values()].map((p) => ({
      name: p.name, connected: p.connected, peer: p.peer,
      tables: [...this.owners].filter(([, o]) => o === p.name).map(([k]) => k).sort(),
      desired: countObjects(p.desired), applied: countObjects(p.applied), last: p.last,
      retryInMs: p.retryAt > now ? p.retryAt - now : undefined,
      ...(ipvs.has(p.name) ? { ipvs: ipvs.get(p.name) } : {}),
    }));
    for (const [name, s] of ipvs) {
      if (!this.producers.has(name)) out.push({ name, connected: true, tables: [], desired: none, applied: none, ipvs: s });
    }
    return out;
  }

  close(): void {
    this.closed = true;
    this.opts.transport.close?.();
    this.ipvs?.close();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const p of this.producers.values()) {
      for (const w of p.waiters.splice(0)) w.reject(new Error('aggregator closed'));
      for (const w of p.removing?.splice(0) ?? []) w.reject(new Error('aggregator closed'));
    }
  }

  private change(p: Producer, ops: NftOp[], declare: boolean, resync: boolean): Promise<CommitInfo> {
    if (this.closed) return Promise.reject(new Error('aggregator closed'));
    const base: ProducerState = declare ? new Map() : p.desired;
    const bad = checkOps(base, ops, noFlowtables);
    if (bad) return Promise.reject(new DeclarationError(p.name, bad.index, bad.reason));
    const touched = new Map<string, Scope>();
    const reset = new Set<string>();
    for (let i = 0; i < ops.length; i++) {
      const o = ops[i];
      const { family, table } = opTable(o);
      const k = tableKey(family, table);
      const owner = this.owners.get(k);
      if (owner !== undefined && owner !== p.name) {
        return Promise.reject(new DeclarationError(p.name, i, `table ${family} ${table} belongs to producer ${owner}`));
      }
      if ('table' in o && (o.op === 'delete' || o.op === 'destroy')) reset.add(k);
      // Which chains (rules) and sets (definition, elements) the op touches: the diff looks only there.
      let sc = touched.get(k);
      if (sc === undefined) touched.set(k, (sc = { chains: new Set(), sets: new Set() }));
      if (sc === 'all') continue;
      if ('table' in o || declare) touched.set(k, 'all');
      else if ('chain' in o) sc.chains.add(o.chain.name);
      else if ('set' in o) sc.sets.add(o.set.name);
      else if ('elements' in o) sc.sets.add(o.elements.set);
      else if ('rule' in o) sc.chains.add(o.rule.chain);
    }
    if (declare) {
      for (const k of p.desired.keys()) p.dirty.set(k, 'all');
      p.desired = new Map();
      if (resync) for (const k of p.applied.keys()) p.replace.add(k);
    }
    applyOps(p.desired, ops);
    for (const [k, sc] of touched) {
      const cur = p.dirty.get(k);
      if (sc === 'all' || cur === 'all') p.dirty.set(k, 'all');
      else if (!cur) p.dirty.set(k, sc);
      else { for (const c of sc.chains) cur.chains.add(c); for (const x of sc.sets) cur.sets.add(x); }
      if (p.desired.has(k)) this.owners.set(k, p.name);
    }
    for (const k of reset) p.replace.add(k);
    if (declare && resync) for (const k of p.desired.keys()) p.replace.add(k);
    p.retryAt = 0; // a new change may fix what was refused: try it now
    return new Promise<CommitInfo>((resolve, reject) => {
      p.waiters.push({ resolve, reject });
      this.schedule();
    });
  }

  private hasChanges(p: Producer): boolean {
    return p.dirty.size > 0 || p.replace.size > 0 || p.resync || p.waiters.length > 0 || !!p.removing?.length;
  }

  private schedule(): void {
    if (this.closed || this.paused || this.running) return;
    if (this.timer) { clearTimeout(this.timer); this.timer = undefined; }
    const now = Date.now();
    let due = Infinity;
    for (const p of this.producers.values()) if (this.hasChanges(p)) due = Math.min(due, Math.max(now, p.retryAt));
    if (due === Infinity) return;
    const delay = Math.max(due - now, this.budget.waitMs(now));
    // Even with no delay, wait for the end of this turn of the event loop: changes made together commit together.
    this.timer = setTimeout(() => { this.timer = undefined; void this.run(); }, delay);
  }

  private async run(): Promise<void> {
    if (this.running || this.closed || this.paused) return;
    this.running = true;
    try {
      await this.commit();
    } catch (e) {
      this.log(`aggregator: commit failed unexpectedly: ${(e as Error).stack ?? e}`);
    } finally {
      this.running = false;
      this.schedule();
    }
  }

  private async commit(): Promise<void> {
    const now = Date.now();
    const parts: Part[] = [];
    for (const p of this.producers.values()) {
      if (!this.hasChanges(p) || p.retryAt > now) continue;
      const ops = p.resync
        ? diffStates(p.applied, p.desired, { replace: new Set([...p.applied.keys(), ...p.desired.keys()]) })
        : diffStates(p.applied, p.desired, { tables: p.dirty, replace: p.replace });
      parts.push({ p, ops, waiters: p.waiters.splice(0) });
      p.dirty = new Map();
      p.replace = new Set();
      p.resync = false;
    }
    const live = parts.filter((x) => x.ops.length > 0);
    for (const x of parts) if (x.ops.length === 0) this.succeeded(x, { commit: this.stats.commits, ops: 0, messages: 0, bytes: 0, ms: 0 });
    if (live.length === 0) return;
    this.budget.take(now);
    await this.send(live);
  }

  /** Sends parts as one transaction; on refusal drops the culprits and sends the rest again. */
  private async send(parts: Part[]): Promise<void> {
    while (parts.length > 0) {
      const batch: NftOp[] = [];
      const starts: number[] = [];
      for (const x of parts) { starts.push(batch.length); for (const o of x.ops) batch.push(o); }
      try {
        const r = await this.opts.transport.apply(batch);
        this.stats.commits++;
        this.stats.messages += r.messages;
        this.stats.bytes += r.bytes;
        this.stats.ops += batch.length;
        const ms = r.ms + (r.encodeMs ?? 0);
        for (const x of parts) {
          applyOps(x.p.applied, x.ops);
          this.succeeded(x, { commit: this.stats.commits, ops: x.ops.length, messages: r.messages, bytes: r.bytes, ms });
        }
        return;
      } catch (e) {
        this.stats.refusedBatches++;
        const failed = (e as Partial<NftApplyError>).failed ?? [];
        const culprits = new Map<Part, ProducerFailure[]>();
        for (const f of failed) {
          if (f.index < 0 || f.index >= batch.length) continue;
          let i = starts.length - 1;
          while (starts[i] > f.index) i--;
          const list = culprits.get(parts[i]) ?? [];
          list.push({ ...f, index: f.index - starts[i] });
          culprits.set(parts[i], list);
        }
        if (culprits.size === 0) {
          // The kernel did not say which object: find the culprits by sending each producer alone.
          if (parts.length > 1) { for (const x of parts) await this.send([x]); return; }
          this.refused(parts[0], new ProducerRefused(parts[0].p.name, [], (e as Error).message));
          return;
        }
        for (const [x, fs] of culprits) this.refused(x, new ProducerRefused(x.p.name, fs));
        parts = parts.filter((x) => !culprits.has(x));
      }
    }
  }

  private succeeded(x: Part, info: CommitInfo): void {
    const p = x.p;
    p.refusals = 0;
    if (info.ops > 0 || !p.last) p.last = { at: new Date().toISOString(), ok: true, commit: info.commit };
    for (const w of x.waiters) w.resolve(info);
    if (info.ops > 0) for (const l of p.listeners) l({ kind: 'committed', info });
    if (p.removing && p.desired.size === 0 && !this.hasPendingChange(p)) {
      for (const [k, o] of [...this.owners]) if (o === p.name) this.owners.delete(k);
      this.producers.delete(p.name);
      this.log(`aggregator: producer ${p.name} removed`);
      for (const w of p.removing.splice(0)) w.resolve(info);
      return;
    }
    for (const [k, o] of [...this.owners]) if (o === p.name && !p.desired.has(k) && !p.applied.has(k)) this.owners.delete(k);
  }

  private hasPendingChange(p: Producer): boolean {
    return p.dirty.size > 0 || p.replace.size > 0 || p.resync || p.waiters.length > 0;
  }

  private refused(x: Part, err: ProducerRefused): void {
    const p = x.p;
    p.refusals++;
    p.resync = true;
    const delay = Math.min(this.opts.maxRetryMs ?? 30000, (this.opts.retryMs ?? 1000) * 2 ** (p.refusals - 1));
    p.retryAt = Date.now() + delay;
    p.last = { at: new Date().toISOString(), ok: false, commit: this.stats.commits, error: err.message };
    this.log(`aggregator: ${err.message}; others' changes go on; full resync of ${p.name} in ${delay} ms`);
    for (const w of x.waiters) w.reject(err);
    for (const l of p.listeners) l({ kind: 'refused', error: err, retryInMs: delay });
    if (p.removing) for (const w of p.removing.splice(0)) w.reject(err);
  }
}

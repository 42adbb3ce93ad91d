// A reflector keeps one kind of object in the ClusterStore equal to what the API server holds,
// the way client-go's does for kube-proxy, with what a service proxy needs to trust it:
//
//   watch-list  when the server serves it (WatchList, on by default since v1.32): one watch with
//          sendInitialEvents=true&resourceVersionMatch=NotOlderThan (a consistent read) sends every
//          object as an ADDED event, then a bookmark annotated k8s.io/initial-events-end whose
//          resourceVersion the store is current at; the same stream then carries the changes. Each
//          event is parsed from its own line, so the whole list is never held as one response. The
//          first time, each object goes into the store as it arrives (the store is not synced yet, so
//          no sink sees the partial state); a relist buffers the objects and replaces the kind at the
//          bookmark, as a list does. A server that refuses it (HTTP 400/422, e.g. the gate off or a
//          server older than v1.27) or twice ends the stream before the bookmark gets lists instead;
//   list   consistent read (no resourceVersion), paginated with limit/continue; the whole result
//          replaces the kind in the store, so objects that vanished meanwhile are deleted;
//   watch  from the list's resourceVersion, with allowWatchBookmarks (the server says "you are
//          current at RV" now and then, so a resume after a quiet period does not start from an
//          old RV) and timeoutSeconds (the server ends each watch after 5-10 min; we resume);
//   410    Gone (HTTP status or ERROR event): the RV was compacted away: relist and replace;
//   errors any other failure or a dropped connection: resume the watch from the last RV after a
//          jittered exponential backoff (an ERROR event other than 410 relists);
//   watchdog a watch silent past a bound (no event, no bookmark, no bytes) is torn down and
//          resumed: a half-open connection never leaves the proxy on stale rules.
//
// Requests ask for protobuf first, as kube-proxy does (contentType 'protobuf', the default; JSON
// second), and each response is read in the encoding the server chose (its Content-Type).
//
// Each event is one store.apply(); the store trims objects and ignores updates that change
// nothing a proxy uses (status noise, labels, annotations).
import type { IncomingMessage } from 'node:http';
import type { Kind } from '../../store/cluster';
import type { Logger } from '../../util/log';
import { Backoff } from '../../util/backoff';
import { sleep } from '../../util/sleep';
import { LineSplitter, mediaType, parseJsonBody, readBody, type Transport } from './http';
import { decodeList, decodeStatus, decodeWatchEvent, FrameSplitter, PROTOBUF, type ContentType } from './protobuf';

export interface ReflectorStore {
  apply(kind: Kind, raw: unknown, deleted?: boolean): void;
  replace(kind: Kind, raws: readonly unknown[]): void;
}

export interface ReflectorOptions {
  kind: Kind;
  /** For logs, e.g. "Services", "Node n1". */
  what: string;
  /** The collection, e.g. /api/v1/services. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  transport: Transport;
  store: ReflectorStore;
  log: Logger;
  /** Items per list page (limit). Default 500, as client-go. */
  pageSize?: number;
  /** Each watch asks for timeoutSeconds in [min, 2*min). Default 300 (client-go's 5 min). */
  minWatchTimeoutSeconds?: number;
  /** A watch that received nothing for this long is restarted. Default 90 s (bookmarks come about once a minute). */
  idleTimeoutMs?: number;
  /** Bound on waiting for response headers, and on a whole list page. Default 60 s. */
  requestTimeoutMs?: number;
  backoff?: Backoff;
  /** Initial syncs by watch-list while this says so (shared by a node's reflectors); lists without it. */
  watchList?: WatchListSupport;
  /** The encoding asked for first. Default 'protobuf' (with JSON as the server's alternative). */
  contentType?: ContentType;
  /** Told what the watches receive, and when the server was last heard from (metrics). */
  observer?: WatchObserver;
}

/** What the reflectors receive from the API server, by resource (`services`, `endpointslices`, `nodes`). */
export interface WatchObserver {
  /** Object events (added, modified, deleted) a watch delivered, the initial ones of a watch-list included. */
  events(resource: string, n: number): void;
  /** Bytes of a watch stream, as read. */
  bytes(resource: string, n: number): void;
  /** The server answered this resource's list or watch (an event, a bookmark, a list page). */
  heard(resource: string): void;
}

/** Whether the API server serves watch-list initial syncs; shared by the reflectors of one server. */
export class WatchListSupport {
  private logged = false;
  constructor(public usable = true) {}

  /** Lists from now on; logged once for all reflectors. */
  refuse(log: Logger, why: string): void {
    this.usable = false;
    if (this.logged) return;
    this.logged = true;
    log.info(`kube: the API server does not serve watch-list initial syncs (${why}); using paginated lists`);
  }
}

/** The encoding the server answered in (for logs, and to pick the reader). */
const encodingOf = (res: IncomingMessage): 'protobuf' | 'JSON' => (mediaType(res) === PROTOBUF ? 'protobuf' : 'JSON');

/** A whole response body in the encoding the server chose: `protobuf` decodes it, else JSON. */
async function readDecoded(res: IncomingMessage, protobuf: (body: Buffer) => unknown, maxBytes?: number): Promise<unknown> {
  const body = await readBody(res, maxBytes);
  return encodingOf(res) === 'protobuf' ? protobuf(body) : parseJsonBody(res, body);
}

/** The annotation of the bookmark that ends a watch-list's initial events. */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/** A watch-list stream that ended before its initial-events-end bookmark. */
class IncompleteWatchList extends Error {}

/** A failed API call: HTTP status (0 = no response) and the Status reason. */
export class ApiError extends Error {
  constructor(message: string, readonly status: number, readonly reason = '') {
    super(message);
  }
  get gone(): boolean { return this.status === 410; }
}

/** Counters for logs and tests. */
export interface ReflectorStats {
  lists: number;
  /** Of those, initial syncs done by watch-list (the rest were paginated lists). */
  watchLists: number;
  /** Lists after the first one (410 Gone, errors). */
  relists: number;
  gone: number;
  watches: number;
  /** Watches that ended in an error, a dropped connection or the watchdog. */
  watchFailures: number;
  events: number;
  bookmarks: number;
  /** Backoffs cut short because the API server could be reached again. */
  earlyRetries: number;
}

interface WatchEvent {
  type?: string;
  object?: { metadata?: { namespace?: string; name?: string; resourceVersion?: string; annotations?: Record<string, string> }; code?: number; reason?: string; message?: string };
}

export class Reflector {
  /** The resourceVersion the store is current at ("" = a list is needed). */
  resourceVersion = '';
  readonly stats: ReflectorStats = { lists: 0, watchLists: 0, relists: 0, gone: 0, watches: 0, watchFailures: 0, events: 0, bookmarks: 0, earlyRetries: 0 };
  private readonly listed: Promise<void>;
  private resolveListed!: () => void;
  private readonly backoff: Backoff;
  /** Something of this kind went into the store (a later initial sync must replace, not add). */
  private applied = false;
  /** The encoding of the last response read (for logs). */
  private encoding: 'protobuf' | 'JSON' | '' = '';

  /** The collection's resource name (the last part of its path): the observer's label. */
  private readonly resource: string;

  constructor(private readonly opts: ReflectorOptions) {
    this.resource = opts.path.split('/').filter(Boolean).pop() ?? opts.path;
    this.listed = new Promise((r) => (this.resolveListed = r));
    this.backoff = opts.backoff ?? new Backoff();
  }

  /** Resolves once the first list has been applied to the store. */
  whenListed(): Promise<void> { return this.listed; }

  /** Lists and watches until the signal aborts. Never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    const { log, what } = this.opts;
    let goneInARow = 0;
    let incompleteInARow = 0;
    while (!signal.aborted) {
      let phase: 'list' | 'watch-list' | 'watch' = 'watch';
      const attemptAt = Date.now();
      try {
        let initial = false;
        if (!this.resourceVersion) {
          if (this.opts.watchList?.usable) {
            phase = 'watch-list';
            initial = true;
          } else {
            phase = 'list';
            await this.list(signal);
            phase = 'watch';
          }
        }
        const t0 = Date.now();
        const events = await this.watch(signal, initial);
        if (signal.aborted) break;
        goneInARow = 0;
        incompleteInARow = 0;
        if (events === 0 && Date.now() - t0 < 1000) throw new Error('the server ended the watch at once');
        log.debug(`kube: ${what}: watch ended after ${((Date.now() - t0) / 1000).toFixed(0)} s (${events} events); resuming at resourceVersion ${this.resourceVersion}`);
      } catch (e) {
        if (signal.aborted) break;
        const err = e as Error;
        // Past its initial-events-end bookmark a watch-list is a plain watch.
        if (phase === 'watch-list' && this.resourceVersion) phase = 'watch';
        if (err instanceof ApiError && err.gone) {
          this.stats.gone++;
          log.info(`kube: ${what}: ${phase === 'watch' ? `resourceVersion ${this.resourceVersion}` : phase === 'list' ? 'list continuation' : 'watch-list'} expired (410 Gone): relisting`);
          this.resourceVersion = '';
          // A relist at once; but never loop hot if the server keeps answering 410.
          if (++goneInARow > 1) await sleep(this.backoff.next(), signal);
          continue;
        }
        if (phase === 'watch-list' && this.opts.watchList) {
          // The request itself was refused as invalid: the gate is off or the server predates it.
          if (err instanceof ApiError && (err.status === 400 || err.status === 422)) {
            this.opts.watchList.refuse(log, err.message);
            continue;
          }
          if (err instanceof IncompleteWatchList && ++incompleteInARow >= 2) {
            this.opts.watchList.refuse(log, err.message);
            continue;
          }
        }
        if (phase !== 'list') this.stats.watchFailures++;
        // An ERROR event other than 410 says the stream is unusable: start over from a list.
        if (err instanceof ApiError && err.reason === 'watch-error') this.resourceVersion = '';
        const delay = this.backoff.next();
        const next = this.resourceVersion ? `resuming the watch at resourceVersion ${this.resourceVersion}` : this.opts.watchList?.usable ? 'watch-list again' : 'listing';
        // Without an HTTP answer the server may be unreachable: retry as soon as it can be reached again.
        const reach = err instanceof ApiError ? undefined : this.opts.transport.reachability;
        log.warn(`kube: ${what}: ${phase} failed: ${err.message}; ${next} in ${delay} ms${reach ? ' (sooner once the API server can be reached again)' : ''}`);
        await this.pause(delay, signal, reach && ((s) => reach.back(attemptAt, s)));
      }
    }
  }

  /** The backoff's delay, ended early when `early` resolves first (the server reachable again). */
  private async pause(ms: number, signal: AbortSignal, early?: (signal: AbortSignal) => Promise<void>): Promise<void> {
    if (!early) return sleep(ms, signal);
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const t0 = Date.now();
    let woken = false;
    try {
      await Promise.race([sleep(ms, ac.signal), early(ac.signal).then(() => { woken = !ac.signal.aborted; })]);
    } finally {
      ac.abort();
      signal.removeEventListener('abort', onAbort);
    }
    if (woken && !signal.aborted) {
      this.stats.earlyRetries++;
      this.opts.log.info(`kube: ${this.opts.what}: the API server can be reached again; retrying after ${Date.now() - t0} ms of ${ms}`);
    }
  }

  /** The Accept header: protobuf first when asked for, JSON always acceptable. */
  private get accept(): string {
    return (this.opts.contentType ?? 'protobuf') === 'protobuf' ? `${PROTOBUF}, application/json` : 'application/json';
  }

  private query(params: Record<string, string | number | undefined>): string {
    const q = new URLSearchParams();
    if (this.opts.labelSelector) q.set('labelSelector', this.opts.labelSelector);
    if (this.opts.fieldSelector) q.set('fieldSelector', this.opts.fieldSelector);
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
    return `${this.opts.path}?${q.toString()}`;
  }

  /** GET with a bound on the time to the response headers; non-2xx becomes an ApiError. */
  private async get(path: string, signal: AbortSignal, ac: AbortController): Promise<IncomingMessage> {
    const timeoutMs = this.opts.requestTimeoutMs ?? 60_000;
    const timer = setTimeout(() => ac.abort(new Error(`no response within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = () => ac.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    let res: IncomingMessage;
    try {
      res = await this.opts.transport.get(path, ac.signal, this.accept);
    } catch (e) {
      throw ac.signal.aborted && ac.signal.reason instanceof Error ? ac.signal.reason : e;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return res;
    const body = (await readDecoded(res, decodeStatus, 1 << 20).catch(() => undefined)) as { reason?: string; message?: string } | undefined;
    throw new ApiError(`HTTP ${status}${body?.reason ? ` ${body.reason}` : ''}${body?.message ? `: ${body.message}` : ''}`, status, body?.reason ?? '');
  }

  /** A consistent, paginated list; replaces the kind in the store and sets the resourceVersion. */
  private async list(signal: AbortSignal): Promise<void> {
    const { kind } = this.opts;
    const t0 = performance.now();
    const items: unknown[] = [];
    let cont = '';
    let rv = '';
    let pages = 0;
    const limit = this.opts.pageSize ?? 500;
    do {
      const ac = new AbortController();
      const pageTimeout = this.opts.requestTimeoutMs ?? 60_000;
      const timer = setTimeout(() => ac.abort(new Error(`list page not read within ${pageTimeout} ms`)), pageTimeout);
      const onAbort = () => ac.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      let page: { metadata?: { resourceVersion?: string; continue?: string }; items?: unknown[] };
      try {
        const res = await this.get(this.query({ limit: limit > 0 ? limit : undefined, continue: cont }), signal, ac);
        page = (await readDecoded(res, (b) => decodeList(kind, b))) as typeof page;
        this.encoding = encodingOf(res);
      } catch (e) {
        throw ac.signal.aborted && !signal.aborted && ac.signal.reason instanceof Error ? ac.signal.reason : e;
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }
      if (!page || !Array.isArray(page.items)) throw new Error('list response has no items');
      this.opts.observer?.heard(this.resource);
      for (const item of page.items) items.push(item);
      rv = page.metadata?.resourceVersion ?? rv;
      cont = page.metadata?.continue ?? '';
      pages++;
    } while (cont && !signal.aborted);
    if (signal.aborted) return;
    if (!rv) throw new Error('list response has no resourceVersion');
    this.opts.store.replace(kind, items);
    this.applied = true;
    this.noteListed(rv, items.length, `${pages} page${pages === 1 ? '' : 's'}, ${this.encoding}`, t0);
  }

  /** A list or watch-list's initial events are in the store: the store is current at `rv`. */
  private noteListed(rv: string, count: number, how: string, t0: number): void {
    const first = this.stats.lists === 0;
    this.stats.lists++;
    if (!first) this.stats.relists++;
    this.resourceVersion = rv;
    this.opts.log.info(`kube: ${first ? 'listed' : 'relisted'} ${count} ${this.opts.what} (resourceVersion ${rv}, ${how}, ${(performance.now() - t0).toFixed(0)} ms)`);
    if (first) this.resolveListed();
  }

  /** One watch from this.resourceVersion, or (`initial`) a watch-list that first sends every object.
   *  Resolves with the number of events when the server ends it (timeoutSeconds); rejects on 410,
   *  errors, a dropped connection, the watchdog, or a watch-list ended before its initial events. */
  private async watch(signal: AbortSignal, initial = false): Promise<number> {
    const { what, log, kind, store } = this.opts;
    const min = this.opts.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(min * (1 + Math.random()));
    const ac = new AbortController();
    const t0 = performance.now();
    const params = initial
      ? { watch: 1, sendInitialEvents: 'true', resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: 'true', timeoutSeconds }
      : { watch: 1, resourceVersion: this.resourceVersion, allowWatchBookmarks: 'true', timeoutSeconds };
    const res = await this.get(this.query(params), signal, ac);
    this.stats.watches++;
    log.debug(`kube: ${what}: ${initial ? 'watch-list (initial events, then changes)' : `watching from resourceVersion ${this.resourceVersion}`} (timeoutSeconds ${timeoutSeconds})`);
    // Until the initial-events-end bookmark: the first time, objects go straight into the store (it
    // holds nothing of this kind); a relist buffers them by name and replaces the kind at the end.
    let initialPhase = initial;
    const buffer = initial && this.applied ? new Map<string, unknown>() : null;
    let initialCount = 0;
    const idleMs = this.opts.idleTimeoutMs ?? 90_000;
    const { observer } = this.opts;
    const { resource } = this;
    return new Promise<number>((resolve, reject) => {
      let events = 0;
      let settled = false;
      // Frames of protobuf WatchEvents, or one JSON event per line: as the server chose.
      this.encoding = encodingOf(res);
      const protobuf = this.encoding === 'protobuf';
      const lines = protobuf ? null : new LineSplitter();
      const frames = protobuf ? new FrameSplitter() : null;
      const onFrame = (buf: Buffer, start: number, end: number) => handle(decodeWatchEvent(kind, buf, start, end) as WatchEvent);
      const onLine = (line: string) => {
        let ev: WatchEvent;
        try {
          ev = JSON.parse(line) as WatchEvent;
        } catch {
          throw new Error(`undecodable watch event: ${line.slice(0, 200)}`);
        }
        handle(ev);
      };
      const read = (chunk: Buffer) => {
        if (frames) frames.push(chunk, onFrame);
        else for (const line of lines!.push(chunk)) onLine(line);
      };
      const readEnd = () => {
        if (lines) for (const line of lines.end()) onLine(line);
        else if (frames!.leftover > 0) throw new Error(`watch stream ended inside a frame (${frames!.leftover} bytes)`);
      };
      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(idle);
        clearTimeout(hard);
        signal.removeEventListener('abort', onAbort);
        if (err || signal.aborted) res.destroy();
        if (err && !signal.aborted) reject(err);
        else resolve(events);
      };
      const onAbort = () => finish();
      signal.addEventListener('abort', onAbort, { once: true });
      const idle = setTimeout(() => finish(new Error(`watch silent for ${idleMs / 1000} s (watchdog)`)), idleMs);
      // The server ends the watch after timeoutSeconds; if it does not, something is wrong.
      const hard = setTimeout(() => finish(new Error(`watch not ended by the server ${timeoutSeconds} s + 60 s after it began (watchdog)`)), (timeoutSeconds + 60) * 1000);
      if (signal.aborted) return finish();
      const handle = (ev: WatchEvent) => {
        const obj = ev.object;
        const rv = obj?.metadata?.resourceVersion;
        switch (ev.type) {
          case 'ADDED':
          case 'MODIFIED':
          case 'DELETED':
            events++;
            if (initialPhase) {
              const deleted = ev.type === 'DELETED';
              if (buffer) {
                const key = `${obj?.metadata?.namespace ?? ''}/${obj?.metadata?.name ?? ''}`;
                if (deleted) buffer.delete(key);
                else buffer.set(key, obj);
              } else {
                store.apply(kind, obj, deleted);
                this.applied = true;
              }
              if (!deleted) initialCount++;
              return;
            }
            this.stats.events++;
            store.apply(kind, obj, ev.type === 'DELETED');
            if (rv) this.resourceVersion = rv;
            return;
          case 'BOOKMARK':
            this.stats.bookmarks++;
            if (!initialPhase) {
              if (rv) this.resourceVersion = rv;
              return;
            }
            // Before the end of the initial events a bookmark's resourceVersion is no resume point.
            if (obj?.metadata?.annotations?.[INITIAL_EVENTS_END] !== 'true') return;
            if (!rv) throw new Error('watch-list: initial-events-end bookmark without a resourceVersion');
            initialPhase = false;
            if (buffer) {
              store.replace(kind, [...buffer.values()]);
              initialCount = buffer.size;
              buffer.clear();
              this.applied = true;
            }
            this.stats.watchLists++;
            this.noteListed(rv, initialCount, `watch-list, ${this.encoding}`, t0);
            return;
          case 'ERROR': {
            const code = typeof obj?.code === 'number' ? obj.code : 0;
            if (code === 410) throw new ApiError(`watch: 410 ${obj?.reason ?? 'Gone'}: ${obj?.message ?? ''}`, 410, obj?.reason ?? 'Gone');
            throw new ApiError(`watch ERROR event ${code} ${obj?.reason ?? ''}: ${obj?.message ?? JSON.stringify(obj)}`, code, 'watch-error');
          }
          default:
            throw new Error(`unknown watch event type ${JSON.stringify(ev.type)}`);
        }
      };
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        idle.refresh(); // the same timer, restarted: a watch-list delivers thousands of chunks
        const before = events;
        try {
          read(chunk);
        } catch (e) {
          finish(e as Error);
        }
        // Once a chunk, not once an event: a watch-list's initial events come thousands a second.
        if (observer) {
          observer.bytes(resource, chunk.length);
          if (events > before) observer.events(resource, events - before);
          observer.heard(resource);
        }
      });
      res.on('end', () => {
        try {
          readEnd();
        } catch (e) {
          return finish(e as Error);
        }
        finish(initialPhase && !signal.aborted ? new IncompleteWatchList(`watch-list ended before its ${INITIAL_EVENTS_END} bookmark (${initialCount} objects)`) : undefined);
      });
      res.on('aborted', () => finish(new Error('watch connection lost')));
      res.on('error', (e) => finish(new Error(`watch connection lost: ${e.message}`)));
      res.on('close', () => finish(!res.complete ? new Error('watch connection lost') : initialPhase && !signal.aborted ? new IncompleteWatchList(`watch-list ended before its ${INITIAL_EVENTS_END} bookmark`) : undefined));
    });
  }
}


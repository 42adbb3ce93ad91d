// The reflector against a scripted HTTP server: pagination, bookmarks, 410 Gone as an HTTP status
// and as an in-stream ERROR event (relist + replace deletes), other ERROR events, the watchdog,
// backoff on failures, and the watch-list initial sync (and its fallback to lists). (The real API server is exercised by test/e2e/kube-*.test.ts.)
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentLogger } from '../../util/log';
import { Backoff } from '../../util/backoff';
import { createTransport, LineSplitter } from './http';
import { INITIAL_EVENTS_END, Reflector, WatchListSupport, type ReflectorStore } from './reflector';
import type { Logger } from '../../util/log';

type Handler = (url: URL, res: http.ServerResponse) => void;

class FakeServer {
  readonly requests: URL[] = [];
  private handlers: Handler[] = [];
  private fallback: Handler = (_u, res) => { res.writeHead(500); res.end('{}'); };
  private server!: http.Server;
  url = '';

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const u = new URL(req.url!, 'http://x');
      this.requests.push(u);
      (this.handlers.shift() ?? this.fallback)(u, res);
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  next(...h: Handler[]): void { this.handlers.push(...h); }
  otherwise(h: Handler): void { this.fallback = h; }
  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

const svc = (name: string, rv: string, port = 80) => ({ metadata: { namespace: 'default', name, resourceVersion: rv }, spec: { clusterIP: '10.0.0.1', ports: [{ port }] } });
const json = (body: unknown, status = 200): Handler => (_u, res) => { res.writeHead(status, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(body)); };
const list = (rv: string, items: unknown[], cont = ''): Handler => json({ metadata: { resourceVersion: rv, continue: cont || undefined }, items });
/** A watch that sends these events, then ends (or stays open if `hold`). */
const watch = (events: unknown[], hold = false): Handler => (_u, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  for (const e of events) res.write(JSON.stringify(e) + '\n');
  if (!hold) res.end();
};
const hang: Handler = () => { /* never answers */ };

class RecordingStore implements ReflectorStore {
  readonly objects = new Map<string, unknown>();
  readonly ops: string[] = [];
  apply(_kind: string, raw: any, deleted = false): void {
    const key = raw.metadata.name;
    this.ops.push(`${deleted ? 'delete' : 'apply'} ${key}`);
    if (deleted) this.objects.delete(key);
    else this.objects.set(key, raw);
  }
  replace(_kind: any, raws: readonly any[]): void {
    const keep = new Set(raws.map((r) => r.metadata.name));
    this.ops.push(`replace ${[...keep].join(',')}`);
    for (const r of raws) this.objects.set(r.metadata.name, r);
    for (const k of [...this.objects.keys()]) if (!keep.has(k)) this.objects.delete(k);
  }
}

async function until(what: string, pred: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('Reflector', () => {
  let server: FakeServer;
  let store: RecordingStore;
  let ac: AbortController;
  let run: Promise<void> | undefined;
  const fastBackoff = () => new Backoff({ initialMs: 5, maxMs: 20, jitter: 0 });

  const reflector = (extra: Partial<ConstructorParameters<typeof Reflector>[0]> = {}) =>
    new Reflector({
      kind: 'Service', what: 'Services', path: '/api/v1/services', labelSelector: '!service.kubernetes.io/service-proxy-name',
      transport: createTransport(server.url, async () => {}), store, log: silentLogger, backoff: fastBackoff(), ...extra,
    });

  beforeEach(async () => {
    server = new FakeServer();
    await server.start();
    store = new RecordingStore();
    ac = new AbortController();
    run = undefined;
  });
  afterEach(async () => {
    ac.abort();
    await server.stop();
    await run;
  });

  test('lists page by page, then watches from the list resourceVersion with bookmarks', async () => {
    server.next(list('10', [svc('a', '8')], 'tok1'), list('10', [svc('b', '9')]));
    server.next(watch([{ type: 'ADDED', object: svc('c', '11') }, { type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } }], true));
    server.otherwise(watch([], true));
    const r = reflector({ pageSize: 1 });
    run = r.run(ac.signal);
    await r.whenListed();
    expect(store.ops[0]).toBe('replace a,b');
    await until('bookmark', () => r.resourceVersion === '15');
    expect([...store.objects.keys()].sort()).toEqual(['a', 'b', 'c']);
    const [p1, p2, w] = server.requests;
    expect(p1.searchParams.get('limit')).toBe('1');
    expect(p1.searchParams.get('resourceVersion')).toBeNull(); // a consistent read
    expect(p1.searchParams.get('labelSelector')).toBe('!service.kubernetes.io/service-proxy-name');
    expect(p2.searchParams.get('continue')).toBe('tok1');
    expect(w.searchParams.get('watch')).toBe('1');
    expect(w.searchParams.get('resourceVersion')).toBe('10');
    expect(w.searchParams.get('allowWatchBookmarks')).toBe('true');
    const t = Number(w.searchParams.get('timeoutSeconds'));
    expect(t).toBeGreaterThanOrEqual(300);
    expect(t).toBeLessThan(600);
    expect(w.searchParams.get('labelSelector')).toBe('!service.kubernetes.io/service-proxy-name');
  });

  test('a watch the server ends is resumed from the last resourceVersion (bookmark included), no relist', async () => {
    server.next(list('10', [svc('a', '10')]));
    server.next(watch([{ type: 'MODIFIED', object: svc('a', '12', 81) }, { type: 'BOOKMARK', object: { metadata: { resourceVersion: '20' } } }]));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await until('second watch', () => server.requests.length >= 3);
    expect(server.requests[2].searchParams.get('resourceVersion')).toBe('20');
    expect(r.stats.lists).toBe(1);
    expect(store.ops).toEqual(['replace a', 'apply a']);
  });

  test('410 as an ERROR event: relist, and replace deletes what vanished', async () => {
    server.next(list('10', [svc('a', '5'), svc('b', '6')]));
    server.next(watch([{ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 10 (30)' } }], true));
    server.next(list('40', [svc('b', '6'), svc('c', '35')]));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await until('relist', () => r.stats.relists === 1);
    expect([...store.objects.keys()].sort()).toEqual(['b', 'c']);
    expect(r.stats.gone).toBe(1);
    expect(r.resourceVersion).toBe('40');
    await until('watch from the new list', () => server.requests.length >= 4);
    expect(server.requests[3].searchParams.get('resourceVersion')).toBe('40');
  });

  test('410 as an HTTP status on the watch: relist', async () => {
    server.next(list('10', [svc('a', '5')]));
    server.next(json({ kind: 'Status', code: 410, reason: 'Expired' }, 410));
    server.next(list('50', []));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await until('relist', () => r.stats.relists === 1);
    expect(store.objects.size).toBe(0);
  });

  test('an expired continue token restarts the list from the beginning', async () => {
    server.next(list('10', [svc('a', '5')], 'tok'), json({ kind: 'Status', code: 410, reason: 'Expired' }, 410));
    server.next(list('20', [svc('a', '5')], 'tok2'), list('20', [svc('b', '6')]));
    server.otherwise(watch([], true));
    const r = reflector({ pageSize: 1 });
    run = r.run(ac.signal);
    await r.whenListed();
    expect(store.ops).toEqual(['replace a,b']); // never a partial replace
    expect(server.requests[2].searchParams.get('continue')).toBeNull();
  });

  test('errors back off and retry; an ERROR event other than 410 relists; a dropped stream resumes', async () => {
    server.next(json({ kind: 'Status', code: 500 }, 500), json({ kind: 'Status', code: 429 }, 429));
    server.next(list('10', [svc('a', '5')]));
    server.next(watch([{ type: 'ERROR', object: { kind: 'Status', code: 500, reason: 'InternalError', message: 'boom' } }], true));
    server.next(list('11', [svc('a', '5')]));
    server.next((_u, res) => { res.writeHead(200); res.write(JSON.stringify({ type: 'ADDED', object: svc('d', '12') }) + '\n'); setTimeout(() => res.destroy(), 20); });
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await until('resume after the dropped stream', () => server.requests.length >= 7);
    expect(r.stats.lists).toBe(2);
    expect(server.requests[6].searchParams.get('watch')).toBe('1');
    expect(server.requests[6].searchParams.get('resourceVersion')).toBe('12');
    expect(store.objects.has('d')).toBe(true);
  });

  test('the watchdog restarts a silent watch (resume, not relist); a server that never answers times out', async () => {
    server.next(list('10', [svc('a', '5')]));
    server.next(watch([], true)); // open, silent
    server.next(hang);            // no response headers at all
    server.otherwise(watch([{ type: 'ADDED', object: svc('z', '13') }], true));
    const r = reflector({ idleTimeoutMs: 100, requestTimeoutMs: 100 });
    run = r.run(ac.signal);
    await until('z', () => store.objects.has('z'));
    expect(r.stats.lists).toBe(1);
    expect(r.stats.watchFailures).toBeGreaterThanOrEqual(2);
    expect(server.requests.slice(1, 4).map((u) => u.searchParams.get('resourceVersion'))).toEqual(['10', '10', '10']);
  });

  test('the first list is what whenListed waits for; stop ends run() promptly', async () => {
    server.next(json({}, 503), json({}, 503));
    server.next(list('1', []));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await r.whenListed();
    expect(r.stats.lists).toBe(1);
    expect(server.requests.slice(0, 3).map((u) => u.searchParams.get('watch'))).toEqual([null, null, null]);
    await until('the watch', () => server.requests.length >= 4);
    // Aborting ends the run (a run that did not end would hold the test until jest's timeout).
    ac.abort();
    await expect(run).resolves.toBeUndefined();
  });
});

const endBookmark = (rv: string) => ({ type: 'BOOKMARK', object: { metadata: { resourceVersion: rv, annotations: { [INITIAL_EVENTS_END]: 'true' } } } });

function capturingLogger(lines: string[]): Logger {
  const put = (m: string) => { lines.push(m); };
  return { ...silentLogger, info: put, warn: put, debug: () => {} } as Logger;
}

describe('Reflector, watch-list initial sync', () => {
  let server: FakeServer;
  let store: RecordingStore;
  let ac: AbortController;
  let run: Promise<void> | undefined;
  let logs: string[];

  const reflector = (support = new WatchListSupport()) =>
    new Reflector({
      kind: 'Service', what: 'Services', path: '/api/v1/services', labelSelector: '!service.kubernetes.io/service-proxy-name',
      transport: createTransport(server.url, async () => {}), store, log: capturingLogger(logs),
      backoff: new Backoff({ initialMs: 5, maxMs: 20, jitter: 0 }), watchList: support,
    });

  beforeEach(async () => {
    server = new FakeServer();
    await server.start();
    store = new RecordingStore();
    ac = new AbortController();
    run = undefined;
    logs = [];
  });
  afterEach(async () => {
    ac.abort();
    await server.stop();
    await run;
  });

  test('one watch: objects applied as they arrive, listed at the initial-events-end bookmark, then changes on the same stream', async () => {
    server.next(watch([
      { type: 'ADDED', object: svc('a', '8') },
      { type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } }, // not the end: no resume point
      { type: 'ADDED', object: svc('b', '9') },
      endBookmark('10'),
      { type: 'MODIFIED', object: svc('a', '11', 81) },
    ], true));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await r.whenListed();
    expect(r.stats.watchLists).toBe(1);
    await until('the change after the bookmark', () => r.resourceVersion === '11');
    expect(store.ops).toEqual(['apply a', 'apply b', 'apply a']); // no replace, no list
    expect(server.requests).toHaveLength(1);
    const q = server.requests[0].searchParams;
    expect(q.get('watch')).toBe('1');
    expect(q.get('sendInitialEvents')).toBe('true');
    expect(q.get('resourceVersionMatch')).toBe('NotOlderThan');
    expect(q.get('allowWatchBookmarks')).toBe('true');
    expect(q.get('resourceVersion')).toBeNull(); // a consistent read
    expect(q.get('labelSelector')).toBe('!service.kubernetes.io/service-proxy-name');
    expect(logs.some((l) => /kube: listed 2 Services \(resourceVersion 10, watch-list/.test(l))).toBe(true);
  });

  test('the resourceVersion is unset until the end bookmark; a stream that dies before it starts over', async () => {
    server.next((_u, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(JSON.stringify({ type: 'ADDED', object: svc('a', '8') }) + '\n');
      setTimeout(() => res.destroy(), 20);
    });
    // The second attempt sees b instead of a: a relist, so it replaces (a vanished).
    server.next(watch([{ type: 'ADDED', object: svc('b', '12') }, endBookmark('12')], true));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await r.whenListed();
    expect(store.ops).toEqual(['apply a', 'replace b']);
    expect([...store.objects.keys()]).toEqual(['b']);
    expect(r.resourceVersion).toBe('12');
    expect(server.requests[1].searchParams.get('sendInitialEvents')).toBe('true');
  });

  test('410 relists by watch-list: objects buffered, the kind replaced at the bookmark (vanished ones deleted)', async () => {
    server.next(watch([{ type: 'ADDED', object: svc('a', '5') }, { type: 'ADDED', object: svc('b', '6') }, endBookmark('10'),
      { type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' } }]));
    server.next(watch([{ type: 'ADDED', object: svc('b', '6') }, { type: 'ADDED', object: svc('c', '35') }, endBookmark('40')], true));
    server.otherwise(watch([], true));
    const r = reflector();
    run = r.run(ac.signal);
    await until('relist', () => r.stats.relists === 1);
    expect(store.ops).toEqual(['apply a', 'apply b', 'replace b,c']);
    expect(logs.some((l) => /kube: Services: resourceVersion 10 expired \(410 Gone\): relisting/.test(l))).toBe(true);
    expect([...store.objects.keys()].sort()).toEqual(['b', 'c']);
    expect(r.stats.gone).toBe(1);
    expect(r.stats.watchLists).toBe(2);
    expect(logs.some((l) => /relisted 2 Services \(resourceVersion 40, watch-list/.test(l))).toBe(true);
  });

  test('a server that refuses it (422 Invalid) gets paginated lists, logged once for every reflector sharing the verdict', async () => {
    const refuse = json({ kind: 'Status', code: 422, reason: 'Invalid', message: 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled' }, 422);
    server.next(refuse, list('10', [svc('a', '8')]), watch([], true));
    server.otherwise(watch([], true));
    const support = new WatchListSupport();
    const r = reflector(support);
    run = r.run(ac.signal);
    await r.whenListed();
    expect(support.usable).toBe(false);
    expect(r.stats.watchLists).toBe(0);
    expect(store.ops).toEqual(['replace a']);
    expect(server.requests[1].searchParams.get('watch')).toBeNull();
    expect(server.requests[1].searchParams.get('limit')).toBe('500');
    support.refuse(capturingLogger(logs), 'again');
    expect(logs.filter((l) => /does not serve watch-list/.test(l))).toHaveLength(1);
    expect(logs[0]).toMatch(/HTTP 422 Invalid: sendInitialEvents is forbidden/);
  });

  test('a server that twice ends the stream without the end bookmark (it ignored sendInitialEvents) gets lists', async () => {
    server.next(watch([{ type: 'ADDED', object: svc('a', '8') }]), watch([{ type: 'ADDED', object: svc('a', '8') }]));
    server.next(list('10', [svc('a', '8')]));
    server.otherwise(watch([], true));
    const support = new WatchListSupport();
    const r = reflector(support);
    run = r.run(ac.signal);
    await r.whenListed();
    expect(support.usable).toBe(false);
    expect(server.requests[2].searchParams.get('limit')).toBe('500');
    expect(logs.some((l) => /ended before its k8s.io\/initial-events-end bookmark/.test(l))).toBe(true);
  });
});

describe('Backoff', () => {
  test('doubles up to the cap with jitter, and forgets failures after a quiet period', () => {
    let now = 0;
    const b = new Backoff({ initialMs: 100, maxMs: 1000, jitter: 1, resetAfterMs: 10_000, now: () => now, random: () => 0.5 });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([150, 300, 600, 1000, 1000]);
    now += 20_000;
    expect(b.next()).toBe(150);
  });
});

describe('LineSplitter', () => {
  test('splits across chunks, including multi-byte characters cut in half', () => {
    const s = new LineSplitter();
    const text = Buffer.from('{"a":"é"}\n{"b":1}\n{"c"');
    expect(s.push(text.subarray(0, 8))).toEqual([]);
    expect(s.push(text.subarray(8))).toEqual(['{"a":"é"}', '{"b":1}']);
    expect(s.push(Buffer.from(':2}'))).toEqual([]);
    expect(s.end()).toEqual(['{"c":2}']);
  });
});

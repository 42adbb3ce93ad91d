// The runner: minimum sync period with burst, coalescing while limited, full resync after a failure.
import { runSink, SyncLimiter } from '../src/runner';
import type { Batch, Sink } from '../src/sink/sink';
import { silentLogger } from '../src/util/log';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import { cluster, ep, slice, svc } from './helpers/k8s';

test('a failed apply is retried as a full sync', async () => {
  const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
  const seen: Batch[] = [];
  let fail = true;
  const ac = new AbortController();
  const sink: Sink = {
    name: 'flaky',
    async apply(b) {
      seen.push(b);
      if (seen.length === 2 && fail) { fail = false; throw new Error('kernel said no'); }
      if (seen.length === 3) ac.abort();
    },
  };
  const done = runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 0, burst: 1, maxBackoffMs: 10 }, ac.signal);
  await new Promise((r) => setTimeout(r, 20));
  c.add(slice('web-1', 'web', [ep('10.244.1.2')]));
  const stats = await done;
  expect(seen.map((b) => [b.reset, b.changes.length])).toEqual([[true, 2], [false, 1], [true, 2]]);
  expect(stats.failures).toBe(1);
});

test('changes made while the minimum period holds a sync back are coalesced into one batch', async () => {
  const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
  const seen: Batch[] = [];
  const ac = new AbortController();
  const sink: Sink = { name: 'rec', async apply(b) { seen.push(b); } };
  const done = runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 1000, burst: 1 }, ac.signal);
  await new Promise((r) => setTimeout(r, 20));
  for (let i = 2; i < 12; i++) { c.add(slice('web-1', 'web', [ep(`10.244.1.${i}`)])); await new Promise((r) => setTimeout(r, 5)); }
  await new Promise((r) => setTimeout(r, 1300));
  ac.abort();
  await done;
  expect(seen).toHaveLength(2);
  expect(seen[1].changes).toHaveLength(1);
  const item = seen[1].changes[0];
  expect(item.op === 'set' && item.item.service!.ports[0].clusterEndpoints.map((e) => e.ip)).toEqual(['10.244.1.11']);
});

test('the limiter allows a burst, then one sync per period (fake clock)', async () => {
  jest.useFakeTimers();
  try {
    const l = new SyncLimiter(100, 2);
    await l.acquire();
    await l.acquire();
    let third = false;
    const p = l.acquire().then(() => { third = true; });
    await jest.advanceTimersByTimeAsync(50);
    expect(third).toBe(false);
    await jest.advanceTimersByTimeAsync(60);
    await p;
    expect(third).toBe(true);
  } finally {
    jest.useRealTimers();
  }
});

test('a stop while waiting for a token returns at once, without spinning until the token comes', async () => {
  const l = new SyncLimiter(60_000, 1);
  await l.acquire();
  const ac = new AbortController();
  const now = jest.spyOn(Date, 'now');
  try {
    const p = l.acquire(ac.signal);
    ac.abort();
    await p;
    // Before: every turn of the loop read the clock again (thousands of times in a minute's wait).
    expect(now.mock.calls.length).toBeLessThan(5);
  } finally {
    now.mockRestore();
  }
});

test('a stop before the source ever synced ends the runner (no wait for a sync that may never come)', async () => {
  // A store that never syncs: the API server was never reached.
  const store = new ClusterStore({ log: silentLogger });
  const state = new NodeState(store, 'n1');
  const applied: Batch[] = [];
  const ac = new AbortController();
  const done = runSink(state, { name: 'rec', async apply(b) { applied.push(b); } }, { log: silentLogger, minSyncPeriodMs: 0, burst: 1 }, ac.signal);
  await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  expect(await done).toEqual({ syncs: 0, failures: 0, lastRevision: 0 });
  expect(applied).toHaveLength(0);
});

test('a subscription waiting for the first sync is woken by the sync alone (no change needed)', async () => {
  const store = new ClusterStore({ log: silentLogger });
  const state = new NodeState(store, 'n1');
  const sub = state.subscribe();
  let ready = false;
  const waiting = sub.ready().then(() => { ready = true; });
  await new Promise((r) => setTimeout(r, 10));
  expect(ready).toBe(false);
  store.markSynced();
  await waiting;
  expect(sub.take().reset).toBe(true);
  sub.close();
});

test('a stop during an apply: the sink is handed the signal, and an apply abandoned for it is no failure', async () => {
  const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
  const ac = new AbortController();
  let given: AbortSignal | undefined;
  const sink: Sink = {
    name: 'slow',
    apply(_b, _s, signal) {
      given = signal;
      return new Promise((_, reject) => signal!.addEventListener('abort', () => reject(signal!.reason), { once: true }));
    },
  };
  const done = runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 0, burst: 1 }, ac.signal);
  await new Promise((r) => setTimeout(r, 20));
  expect(given).toBe(ac.signal);
  ac.abort();
  expect(await done).toEqual({ syncs: 0, failures: 0, lastRevision: 0 });
});

test('changes wait for the change period only: a full sync\'s period does not hold them back (fake clock)', async () => {
  jest.useFakeTimers();
  try {
    for (const [minChangePeriodMs, batches] of [[0, 4], [undefined, 1]] as const) {
      const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
      const seen: Batch[] = [];
      const ac = new AbortController();
      const sink: Sink = { name: 'rec', async apply(b) { seen.push(b); } };
      const done = runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 1000, minChangePeriodMs, burst: 1 }, ac.signal);
      await jest.advanceTimersByTimeAsync(0);
      for (let i = 2; i < 5; i++) { c.add(slice('web-1', 'web', [ep(`10.244.1.${i}`)])); await jest.advanceTimersByTimeAsync(0); }
      // No time has passed: with a change period of 0 every change went at once, one batch each;
      // with the full syncs' limiter (the default when none is given) they all still wait.
      expect({ minChangePeriodMs, batches: seen.length }).toEqual({ minChangePeriodMs, batches });
      expect(seen[0].reset).toBe(true);
      ac.abort();
      await jest.advanceTimersByTimeAsync(2000);
      await done;
    }
  } finally {
    jest.useRealTimers();
  }
});

test('a change during the backoff after a failed sync ends it: the retry waits only for the limiter', async () => {
  // What another process holding kpng's table looks like: syncs refused until it lets go, the
  // endpoints changing meanwhile (make chaos SCENARIOS=batch-rejected).
  const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
  const at: { t: number; reset: boolean; ok: boolean }[] = [];
  let refuse = true;
  const ac = new AbortController();
  const t0 = Date.now();
  const sink: Sink = {
    name: 'held',
    async apply(b) {
      const ok = !refuse;
      at.push({ t: Date.now() - t0, reset: b.reset, ok });
      if (!ok) throw new Error('nftables batch rejected: EPERM');
      ac.abort();
    },
  };
  const done = runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 0, burst: 1, maxBackoffMs: 60_000 }, ac.signal);
  // The first sync is refused: the backoff is 1 s. Freed at 200 ms, a change at 300 ms.
  await new Promise((r) => setTimeout(r, 200));
  refuse = false;
  await new Promise((r) => setTimeout(r, 100));
  c.add(slice('web-1', 'web', [ep('10.244.1.2')]));
  const stats = await done;
  expect(at.map((a) => [a.reset, a.ok])).toEqual([[true, false], [true, true]]);
  expect(stats.failures).toBe(1);
  // Retried within the poll of the change, well before the 1 s backoff ran out.
  expect(at[1].t).toBeLessThan(700);
});

test('without a change, a failed sync is retried when its backoff runs out', async () => {
  const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
  const at: number[] = [];
  const ac = new AbortController();
  const t0 = Date.now();
  const sink: Sink = {
    name: 'held',
    async apply() {
      at.push(Date.now() - t0);
      if (at.length === 1) throw new Error('nftables batch rejected: EPERM');
      ac.abort();
    },
  };
  await runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 0, burst: 1 }, ac.signal);
  expect(at[1] - at[0]).toBeGreaterThanOrEqual(990);
});

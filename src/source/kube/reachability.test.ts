// Reachability: a waiter wakes only when the server is seen reachable after it was seen unreachable
// (since the failed attempt began); a server that stays reachable never shortens a backoff.
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Reachability, tcpProbe } from './reachability';

/** A probe answering from a script, then `rest` forever. */
function scripted(answers: boolean[], rest: boolean) {
  let i = 0;
  return async () => (i < answers.length ? answers[i++]! : rest);
}

/** Whether `p` settles within `ms`. */
const settles = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

test('a probe that connects after probes that failed wakes the waiter', async () => {
  const r = new Reachability(scripted([false, false, true], true), { periodMs: 5 });
  const ac = new AbortController();
  await expect(settles(r.back(Date.now(), ac.signal), 2000)).resolves.toBe(true);
  expect(r.probes).toBe(3);
  expect(ac.signal.aborted).toBe(false);
});

test('a server reachable all along never wakes the waiter (the backoff alone sets the pace)', async () => {
  const r = new Reachability(scripted([], true), { periodMs: 5 });
  const ac = new AbortController();
  const waiting = r.back(Date.now(), ac.signal);
  expect(await settles(waiting, 200)).toBe(false);
  expect(r.probes).toBeGreaterThan(3);
  ac.abort();
  await waiting;
  // The loop stops with its last waiter.
  const n = r.probes;
  await new Promise((res) => setTimeout(res, 50));
  expect(r.probes).toBeLessThanOrEqual(n + 1);
});

test("the attempt's own connect failure counts: the first probe that connects wakes", async () => {
  const r = new Reachability(scripted([], true), { periodMs: 5 });
  const since = Date.now();
  r.markDown();
  await expect(settles(r.back(since, new AbortController().signal), 2000)).resolves.toBe(true);
  expect(r.probes).toBe(1);
});

test('an outage seen before the failed attempt began does not count', async () => {
  let t = 1000;
  const r = new Reachability(scripted([], true), { periodMs: 5, now: () => t });
  r.markDown();
  t = 2000;
  const ac = new AbortController();
  const waiting = r.back(1500, ac.signal);
  expect(await settles(waiting, 100)).toBe(false);
  ac.abort();
  await waiting;
});

test('every waiter of one outage wakes on one probe', async () => {
  const r = new Reachability(scripted([false, true], true), { periodMs: 5 });
  const since = Date.now();
  const all = Promise.all([r.back(since, new AbortController().signal), r.back(since, new AbortController().signal), r.back(since, new AbortController().signal)]);
  await expect(settles(all, 2000)).resolves.toBe(true);
  expect(r.probes).toBe(2);
});

test('tcpProbe: true for a listening port, false for a closed one', async () => {
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const port = (server.address() as AddressInfo).port;
  try {
    await expect(tcpProbe('127.0.0.1', port)(2000)).resolves.toBe(true);
  } finally {
    await new Promise((res) => server.close(res));
  }
  await expect(tcpProbe('127.0.0.1', port)(2000)).resolves.toBe(false);
});

import { rateLimited, TokenBucket, type Clock } from './rate-limit';

/** A clock whose sleeps complete only when the test moves time. */
function fakeClock() {
  let t = 0;
  const sleepers: Array<{ at: number; resolve: () => void }> = [];
  const clock: Clock = {
    now: () => t,
    sleep: (ms) => new Promise<void>((resolve) => { sleepers.push({ at: t + ms, resolve }); }),
  };
  const advance = async (ms: number) => {
    t += ms;
    for (const s of sleepers.filter((x) => x.at <= t)) { sleepers.splice(sleepers.indexOf(s), 1); s.resolve(); }
    await new Promise((r) => setImmediate(r));
  };
  return { clock, advance };
}

test('a burst goes at once, then one request per 1/qps seconds, in order', async () => {
  const { clock, advance } = fakeClock();
  const b = new TokenBucket(2, 3, clock);
  const done: number[] = [];
  const signal = new AbortController().signal;
  for (let i = 0; i < 6; i++) void b.take(signal).then(() => done.push(i));
  await advance(0);
  expect(done).toEqual([0, 1, 2]);
  await advance(499);
  expect(done).toEqual([0, 1, 2]);
  await advance(1);
  expect(done).toEqual([0, 1, 2, 3]);
  await advance(1000);
  expect(done).toEqual([0, 1, 2, 3, 4, 5]);
});

test('client-go\'s meanings: qps 0 and burst 0 are the defaults (5, 10), a negative qps is no limit', async () => {
  const { clock, advance } = fakeClock();
  const signal = new AbortController().signal;
  const d = new TokenBucket(0, 0, clock);
  let n = 0;
  for (let i = 0; i < 11; i++) void d.take(signal).then(() => n++);
  await advance(0);
  expect(n).toBe(10);
  await advance(200);
  expect(n).toBe(11);
  const none = new TokenBucket(-1, 0, clock);
  expect(none.unlimited).toBe(true);
  await Promise.all(Array.from({ length: 100 }, () => none.take(signal)));
});

test('the transport tells each request\'s wait for the limiter (client-go\'s rate limiter latency)', async () => {
  const { clock, advance } = fakeClock();
  const b = new TokenBucket(2, 1, clock);
  const waits: number[] = [];
  const t = rateLimited({ server: 'https://api:6443', get: async () => ({}) as never }, b, (s) => waits.push(s));
  const signal = new AbortController().signal;
  const first = t.get('/a', signal);
  const second = t.get('/b', signal);
  await advance(0);
  await first;
  expect(waits).toEqual([0]);
  await advance(500);
  await second;
  expect(waits).toEqual([0, 0.5]);
});

// `--to ebpf` is two dataplanes: a failing one must not keep the other from syncing.
import type { Dataplane, SyncReport } from '../kernel/dataplane';
import { CombinedDataplane } from './combined';

const part = (name: string, calls: string[], fail?: Error): Dataplane => ({
  name,
  async fullSync(): Promise<SyncReport> { calls.push(`${name} full`); if (fail) throw fail; return { messages: 1, bytes: 10, ms: 1 }; },
  async update(): Promise<SyncReport> { calls.push(`${name} update`); if (fail) throw fail; return { messages: 2, bytes: 20, ms: 2 }; },
});

test('both parts sync; the reports add up', async () => {
  const calls: string[] = [];
  const d = new CombinedDataplane('ebpf', [part('bpf', calls), part('nft', calls)]);
  // Each part's wall time too (the KernelSink logs them beside the whole's).
  const parts = [{ name: 'bpf', wallMs: expect.any(Number) }, { name: 'nft', wallMs: expect.any(Number) }];
  expect(await d.fullSync([], undefined, 1)).toEqual({ messages: 2, bytes: 20, ms: 2, parts });
  expect(await d.update([], undefined, 2)).toEqual({ messages: 4, bytes: 40, ms: 4, parts });
  expect(calls).toEqual(['bpf full', 'nft full', 'bpf update', 'nft update']);
});

test('the nft part starts when the socket LB part only waits for the kernel, not before', async () => {
  const events: string[] = [];
  const part = (name: string, signals: boolean): Dataplane => ({
    name,
    async fullSync(_s, _n, _r, waiting): Promise<SyncReport> {
      events.push(`${name} plans`);
      await new Promise((r) => setTimeout(r, 5));
      if (signals) waiting?.();
      events.push(`${name} waits for the kernel`);
      await new Promise((r) => setTimeout(r, 20));
      events.push(`${name} done`);
      return { messages: 1, bytes: 1, ms: 1 };
    },
    async update(): Promise<SyncReport> { return { messages: 0, bytes: 0, ms: 0 }; },
  });
  await new CombinedDataplane('ebpf', [part('bpf', true), part('nft', false)]).fullSync([], undefined, 1);
  expect(events).toEqual(['bpf plans', 'bpf waits for the kernel', 'nft plans', 'nft waits for the kernel', 'bpf done', 'nft done']);
  // A part that never says it waits: the next one starts when it has ended.
  events.length = 0;
  await new CombinedDataplane('ebpf', [part('bpf', false), part('nft', false)]).fullSync([], undefined, 1);
  expect(events).toEqual(['bpf plans', 'bpf waits for the kernel', 'bpf done', 'nft plans', 'nft waits for the kernel', 'nft done']);
});

test('a failing first part still lets the second sync, then the sync fails with the first error', async () => {
  const calls: string[] = [];
  const boom = new Error('update kpng_svc: No space left on device');
  const d = new CombinedDataplane('ebpf', [part('bpf', calls, boom), part('nft', calls)]);
  await expect(d.fullSync([], undefined, 1)).rejects.toBe(boom);
  await expect(d.update([], undefined, 2)).rejects.toBe(boom);
  expect(calls).toEqual(['bpf full', 'nft full', 'bpf update', 'nft update']);
});

test('a stop before a part starts keeps that part\'s state and abandons the sync; a stop after the last part does not', async () => {
  const calls: string[] = [];
  const ac = new AbortController();
  const stopping: Dataplane = { ...part('bpf', calls), async fullSync(_s, _n, _r, _w, signal): Promise<SyncReport> { calls.push(`bpf full ${signal ? 'with' : 'without'} signal`); ac.abort(new Error('stopping')); return { messages: 1, bytes: 1, ms: 1 }; } };
  await expect(new CombinedDataplane('ebpf', [stopping, part('nft', calls)]).fullSync([], undefined, 1, undefined, ac.signal)).rejects.toThrow('stopping');
  expect(calls).toEqual(['bpf full with signal']);
  calls.length = 0;
  const late = new AbortController();
  const last: Dataplane = { ...part('nft', calls), async fullSync(): Promise<SyncReport> { calls.push('nft full'); late.abort(); return { messages: 1, bytes: 1, ms: 1 }; } };
  expect(await new CombinedDataplane('ebpf', [part('bpf', calls), last]).fullSync([], undefined, 1, undefined, late.signal)).toMatchObject({ messages: 2, bytes: 11, ms: 2 });
});

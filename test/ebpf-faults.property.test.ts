// Property: BPF map errors at random points of random change sequences never leave the socket LB's
// maps inconsistent, and the maps heal within one retry once the errors stop. The real model turns
// random cluster changes into ENLS batches; the real socket-LB dataplane behind a KernelSink (retry,
// full sync over the maps as they are, id takeover) sends them to the faulty fake maps
// (src/backend/ebpf/faulty.ts), which fail a fraction of batches partway (the groups and elements
// before the failure stay written, as with the kernel's batch syscalls), of dumps and of socket
// destructions:
//   - whenever a batch fails, and after every attempt, no service address in the maps names a slot or
//     backend the maps do not hold (a connect() is balanced by a whole state, old or new, or refused
//     by a service that was refusing);
//   - once faults stop, the next sync brings the maps to what a clean first sync of the final ENLS
//     writes: the same destinations for every service address, no leaked slot or backend.
import fc from 'fast-check';
import { KernelSink } from '../src/backend/kernel/kernel-sink';
import { EbpfDataplane } from '../src/backend/ebpf/dataplane';
import { FakeEbpfMaps } from '../src/backend/ebpf/fake';
import { FaultyEbpfMaps } from '../src/backend/ebpf/faulty';
import { modelOptions } from '../src/model/options';
import { action, applyAction, nodeObject, options } from './helpers/cluster-actions';
import { cluster } from './helpers/k8s';
import { enlsOf } from './helpers/nft-world';
import { SinkDriver } from './helpers/sink-driver';

const asLoader = (fake: FakeEbpfMaps) => async () => fake;

/** What a clean first sync of the cluster's current ENLS leaves in fresh maps. */
async function clean(state: Parameters<typeof enlsOf>[0]): Promise<FakeEbpfMaps> {
  const { services, node } = enlsOf(state);
  const fake = new FakeEbpfMaps();
  await new EbpfDataplane(asLoader(fake), () => {}).fullSync(services.map(([, s]) => s), node, 1);
  return fake;
}

describe('BPF map faults never leave the socket LB inconsistent', () => {
  test('random changes, batches failing partway, dumps and socket destruction failing, then one retry converges', async () => {
    const seen = { batches: 0, partial: 0, dumps: 0, destroys: 0, attempts: 0, failed: 0, full: 0 };
    await fc.assert(fc.asyncProperty(options, fc.array(action, { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 1 << 30 }), async (opts, actions, seed) => {
      const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions(opts) });
      const loader = new FaultyEbpfMaps({ rate: 0.35, dumpRate: 0.1, destroyRate: 0.3, seed });
      const sink = new KernelSink(new EbpfDataplane(asLoader(loader), () => {}, undefined, { destroyTcp: true }), { log: () => {} });
      const driver = new SinkDriver(c.state);
      const attempt = async (): Promise<boolean> => {
        const { batch, view } = driver.next();
        let ok = true;
        try {
          await sink.apply(batch, view);
        } catch {
          ok = false;
        }
        seen.attempts++;
        if (!ok) seen.failed++;
        expect(loader.inconsistent()).toEqual([]);
        return ok;
      };
      await attempt();
      for (const a of actions) {
        applyAction(c, a);
        await attempt();
      }
      expect(loader.inconsistentAtFailure).toEqual([]);
      expect(loader.refusedBetween.size).toBe(0);
      seen.batches += loader.injected.length;
      seen.partial += loader.injected.filter((f) => f.group > 0 || f.element > 0).length;
      seen.dumps += loader.dumpFailures;
      seen.destroys += loader.destroyFailures;
      seen.full += sink.stats.fullSyncs;
      // Faults stop: one retry heals (a sync with nothing new still repairs after a failure).
      loader.faulty = false;
      expect(await attempt()).toBe(true);
      const want = await clean(c.state);
      expect(loader.resolve()).toEqual(want.resolve());
      expect([loader.svc.size, loader.be.size]).toEqual([want.svc.size, want.be.size]);
    }), { numRuns: 150 });
    // The property met what it is about: failed batches (some after writing part of themselves),
    // failed dumps and socket destructions, and the full syncs that recovered from them.
    expect(seen.batches).toBeGreaterThan(20);
    expect(seen.partial).toBeGreaterThan(10);
    expect(seen.dumps).toBeGreaterThan(0);
    expect(seen.destroys).toBeGreaterThan(0);
    expect(seen.full).toBeGreaterThan(seen.attempts / 10);
  });

  test('random changes while opens fail, links are severed and entries are tampered with: the audit finds every tampering, one retry converges', async () => {
    const seen = { openFailures: 0, severings: 0, tamperings: 0, found: 0, skipped: 0 };
    await fc.assert(fc.asyncProperty(options, fc.array(action, { minLength: 1, maxLength: 10 }), fc.integer({ min: 1, max: 1 << 30 }), async (opts, actions, seed) => {
      const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions(opts) });
      const loader = new FaultyEbpfMaps({ rate: 0.1, openRate: 0.3, severRate: 0.25, tamperRate: 0.5, seed });
      const dp = new EbpfDataplane(() => loader.open(), () => {}, undefined, { destroyTcp: true });
      const sink = new KernelSink(dp, { log: () => {} });
      const lost: string[] = [];
      sink.watch((why) => lost.push(why));
      const driver = new SinkDriver(c.state);
      const attempt = async (): Promise<boolean> => {
        const { batch, view } = driver.next();
        try {
          await sink.apply(batch, view);
        } catch {
          return false;
        }
        // A sync that succeeded leaves exactly its plans in the maps, whatever happened before it.
        expect(await dp.differences()).toBe(0);
        return true;
      };
      try {
        await attempt();
        for (const a of actions) {
          applyAction(c, a);
          loader.sever();
          const ok = await attempt();
          if (!loader.tamper()) continue;
          // Another process changed an entry: the audit's next read says so (unless the last sync
          // failed: then the next one is a full sync over the maps anyway).
          const before = lost.length;
          const n = await dp.auditNow();
          if (ok) {
            expect(n).toBeGreaterThan(0);
            expect(lost.length).toBe(before + 1);
            expect(await dp.auditNow()).toBeUndefined();   // said once, until a sync
            seen.found++;
          } else {
            expect(n).toBeUndefined();
            seen.skipped++;
          }
        }
        seen.openFailures += loader.openFailures;
        seen.severings += loader.severings;
        seen.tamperings += loader.tamperings;
        loader.faulty = false;
        expect(await attempt()).toBe(true);
        const want = await clean(c.state);
        expect(loader.resolve()).toEqual(want.resolve());
        expect([loader.svc.size, loader.be.size]).toEqual([want.svc.size, want.be.size]);
      } finally {
        await dp.close();
      }
    }), { numRuns: 120 });
    expect(seen.openFailures).toBeGreaterThan(10);
    expect(seen.severings).toBeGreaterThan(10);
    expect(seen.found).toBeGreaterThan(20);
  });

  test('a batch failing on demand: the sync rejects with the kernel\'s reason, the next one repairs', async () => {
    const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions({}) });
    const loader = new FaultyEbpfMaps();
    const logs: string[] = [];
    const sink = new KernelSink(new EbpfDataplane(asLoader(loader), (m) => logs.push(m)), { log: (m) => logs.push(m) });
    const driver = new SinkDriver(c.state);
    const next = () => { const { batch, view } = driver.next(); return sink.apply(batch, view); };
    await next();
    applyAction(c, { k: 'svc', i: 0, spec: { type: 'NodePort', fams: ['v4'], ports: [0, 1], ext: false, lb: false, ranges: null, itp: undefined, etp: undefined, affinity: 0 } });
    applyAction(c, { k: 'slice', i: 0, v6: false, target: 8080, eps: [{ ip: 1, node: 'n1', ready: true, serving: true, terminating: false, zone: undefined }] });
    loader.failNext = true;
    await expect(next()).rejects.toThrow(/(E2BIG|ENOMEM|EBUSY)/);
    expect(sink.stats.failures).toBe(1);
    expect(loader.inconsistent()).toEqual([]);
    await next();
    expect(sink.stats.fullSyncs).toBe(2);
    expect(loader.resolve()).toEqual((await clean(c.state)).resolve());
    expect(Object.keys(loader.resolve()).length).toBeGreaterThan(0);
  });
});

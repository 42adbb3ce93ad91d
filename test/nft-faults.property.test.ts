// Property: kernel errors at random points of random change sequences never leave a half-applied
// table, and the table heals within one retry once the errors stop. The real model turns random
// cluster changes into ENLS batches; the real nft backend (KernelSink + NftDataplane, retry and
// repair logic included) sends them to the faulty fake kernel (src/backend/nft/faulty.ts), which
// refuses a fraction of transactions (ENOMEM, EBUSY, ENFILE, ENOBUFS: nothing applied) and "loses" a
// fraction of others (committed, but reported as EPROTO: kpng cannot know what the table holds).
//   - after every attempt the fake holds either what it held before (a refusal) or exactly the full
//     rendering of the ENLS the attempt was for: never a mix (a packet only ever meets a whole state);
//   - after a successful attempt, the latter;
//   - once faults stop, the next sync (the runner's retry) brings the table to the final ENLS.
import fc from 'fast-check';
import { nftKernelSink } from '../src/backend/nft/sink';
import type { IpFamily } from '../src/backend/nft/types';
import { modelOptions } from '../src/model/options';
import { action, applyAction, nodeObject, options } from './helpers/cluster-actions';
import { FaultyNftKernel } from '../src/backend/nft/faulty';
import { cluster } from './helpers/k8s';
import { tableContent, type FakeNft } from '../src/backend/nft/fake';
import { enlsOf, renderFull } from './helpers/nft-world';
import { SinkDriver, stateView } from './helpers/sink-driver';

const FAMS: IpFamily[] = ['ip', 'ip6'];
/** Both tables' content as text, object keys sorted (a repair re-creates chains in another order). */
const sorted = (v: unknown): unknown => (Array.isArray(v) ? v.map(sorted) : v && typeof v === 'object'
  ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])])) : v);
const content = (nft: FakeNft) => JSON.stringify(sorted(FAMS.map((f) => tableContent(nft.tables[f]))));

describe('kernel faults never leave a half-applied nft table', () => {
  test('random changes, random refused and lost commits, then one retry converges', async () => {
    const seen = { refused: 0, lost: 0, conntrack: 0, attempts: 0, full: 0 };
    await fc.assert(fc.asyncProperty(options, fc.array(action, { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 1 << 30 }), async (opts, actions, seed) => {
      const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions(opts) });
      const kernel = new FaultyNftKernel({ rate: 0.35, conntrackRate: 0.3, seed });
      const sink = nftKernelSink({ log: () => {} }, kernel);
      const driver = new SinkDriver(c.state);
      const attempt = async (): Promise<boolean> => {
        const { batch, view, items } = driver.next();
        const before = content(kernel.fake);
        const { services, node } = enlsOf({ items: () => items });
        const want = content(renderFull(services, node));
        let ok = true;
        try {
          await sink.apply(batch, view);
        } catch {
          ok = false;
        }
        seen.attempts++;
        const after = content(kernel.fake);
        if (ok) expect(after).toBe(want);
        else expect([before, want]).toContain(after);
        return ok;
      };
      await attempt();
      for (const a of actions) {
        applyAction(c, a);
        await attempt();
      }
      seen.refused += kernel.injected.filter((i) => i.fault === 'refused').length;
      seen.lost += kernel.injected.filter((i) => i.fault === 'lost').length;
      seen.conntrack += kernel.conntrackFailures;
      seen.full += sink.stats.fullSyncs;
      // Faults stop: one retry heals (a sync with nothing new still repairs after a failure).
      kernel.faulty = false;
      expect(await attempt()).toBe(true);
      const { services, node } = enlsOf(c.state);
      expect(content(kernel.fake)).toBe(content(renderFull(services, node)));
    }), { numRuns: 120 });
    // The property met what it is about: both kinds of fault, conntrack failures, and recoveries.
    expect(seen.refused).toBeGreaterThan(20);
    expect(seen.lost).toBeGreaterThan(20);
    expect(seen.conntrack).toBeGreaterThan(0);
    expect(seen.full).toBeGreaterThan(seen.attempts / 10);
  });

  test('a fault on a chosen call: the refused batch leaves the table as it was, the next sync repairs it', async () => {
    const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions({}) });
    const kernel = new FaultyNftKernel({ calls: [1], kinds: ['refused'] });
    const logs: string[] = [];
    const sink = nftKernelSink({ log: (m) => logs.push(m) }, kernel);
    const items = () => [...c.state.items()];
    await sink.apply({ revision: 1, reset: true, changes: items().map((item) => ({ op: 'set' as const, key: item.key, item })) }, stateView(items(), 1));
    const first = content(kernel.fake);
    applyAction(c, { k: 'svc', i: 0, spec: { type: 'NodePort', fams: ['v4'], ports: [0], ext: false, lb: false, ranges: null, itp: undefined, etp: undefined, affinity: 0 } });
    const svcItem = items().find((i) => i.key.startsWith('svc/'))!;
    await expect(sink.apply({ revision: 2, reset: false, changes: [{ op: 'set', key: svcItem.key, item: svcItem }] }, stateView(items(), 2))).rejects.toThrow(/nftables batch rejected: .*: (ENOMEM|EBUSY|ENFILE|ENOBUFS)/);
    expect(content(kernel.fake)).toBe(first);
    expect(sink.stats.failures).toBe(1);
    expect(logs.join('\n')).toMatch(/(ENOMEM|EBUSY|ENFILE|ENOBUFS)/);
    await sink.apply({ revision: 3, reset: false, changes: [] }, stateView(items(), 3));
    const { services, node } = enlsOf(c.state);
    expect(content(kernel.fake)).toBe(content(renderFull(services, node)));
    expect(sink.stats.fullSyncs).toBe(2);
  });
});

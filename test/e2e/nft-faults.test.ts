// Kernel faults against the real kernel: the nft backend (KernelSink + NftDataplane + the native
// addon, in a throwaway network namespace) behind the faulty wrapper of src/backend/nft/faulty.ts,
// which refuses some batches before they reach the kernel and reports others as lost after the
// kernel committed them (EPROTO, as the addon does when the final ACK never comes). Random cluster
// changes through the real model; after every attempt the kernel's own listing holds either what it
// held before or exactly the full rendering of the ENLS the attempt was for (a packet only ever meets
// a whole state), and once faults stop one retry brings it to the final ENLS.
import fc from 'fast-check';
import { nativeKernel } from '../../src/backend/nft';
import { nftKernelSink } from '../../src/backend/nft/sink';
import { modelOptions } from '../../src/model/options';
import { action, applyAction, nodeObject, options } from '../helpers/cluster-actions';
import { FaultyNftKernel } from '../../src/backend/nft/faulty';
import { gated, need } from '../helpers/gate';
import { cluster } from '../helpers/k8s';
import { Netns } from '../helpers/netns';
import { diffFakes } from '../helpers/nft-compare';
import { kernelFake } from '../helpers/nft-lift';
import { nftList } from '../helpers/nft-list';
import type { FakeTable } from '../../src/backend/nft/fake';
import { enlsOf, renderFull } from '../helpers/nft-world';
import { SinkDriver } from '../helpers/sink-driver';
import type { IpFamily } from '../../src/backend/nft/types';

const d = gated(need.netns(), need.native(), need.testNative()).describe;

/** Pick-map shards are created on first use and kept when they empty (a full sync makes only the used ones). */
function withoutEmptyShards(t: Record<IpFamily, FakeTable>): Record<IpFamily, FakeTable> {
  for (const f of ['ip', 'ip6'] as IpFamily[]) {
    for (const [name, set] of t[f].sets) if ((set.spec.kind === 'pickVipMap' || set.spec.kind === 'pickPortMap') && set.elems.size === 0) t[f].sets.delete(name);
  }
  return t;
}

d('kernel faults never leave a half-applied nft table (real kernel)', () => {
  let ns: Netns;
  beforeAll(() => { ns = new Netns('kft'); });
  afterAll(() => ns?.destroy());

  /** The kernel's kpng tables, lifted into the tracer's fake (no table yet: empty). */
  const kernelTables = async () => {
    const l = { ip: await nftList('ip', 'kpng', { netns: ns.path }).catch(() => undefined), ip6: await nftList('ip6', 'kpng', { netns: ns.path }).catch(() => undefined) };
    return withoutEmptyShards(kernelFake(Object.fromEntries(Object.entries(l).filter(([, v]) => v)) as Parameters<typeof kernelFake>[0]).tables);
  };

  test('random changes, refused and lost commits, then one retry converges', async () => {
    const seen = { refused: 0, lost: 0, partial: 0 };
    // The fault counts are random: more rounds run (up to 4) until each fault was met often enough.
    for (let round = 0; round < 4 && (round === 0 || seen.refused <= 3 || seen.lost <= 3); round++) {
      await fc.assert(fc.asyncProperty(options, fc.array(action, { minLength: 1, maxLength: 8 }), fc.integer({ min: 1, max: 1 << 30 }), async (opts, actions, seed) => {
        ns.nft('flush', 'ruleset');
        const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions(opts) });
        const kernel = new FaultyNftKernel({ rate: 0.4, seed }, nativeKernel({ netns: ns.path }));
        const sink = nftKernelSink({ log: () => {} }, kernel);
        const driver = new SinkDriver(c.state);
        const attempt = async (): Promise<boolean> => {
          const { batch, view, items } = driver.next();
          const before = await kernelTables();
          const { services, node } = enlsOf({ items: () => items });
          const want = renderFull(services, node).tables;
          let ok = true;
          try {
            await sink.apply(batch, view);
          } catch {
            ok = false;
          }
          const after = await kernelTables();
          const isWant = diffFakes(want, after).length === 0;
          if (ok) expect(diffFakes(want, after)).toEqual([]);
          else {
            const isBefore = diffFakes(before, after).length === 0;
            if (!isWant && !isBefore) seen.partial++;
            expect(isWant || isBefore).toBe(true);
          }
          return ok;
        };
        try {
          await attempt();
          for (const a of actions) {
            applyAction(c, a);
            await attempt();
          }
          seen.refused += kernel.injected.filter((i) => i.fault === 'refused').length;
          seen.lost += kernel.injected.filter((i) => i.fault === 'lost').length;
          kernel.faulty = false;
          expect(await attempt()).toBe(true);
          const { services, node } = enlsOf(c.state);
          expect(diffFakes(renderFull(services, node).tables, await kernelTables())).toEqual([]);
        } finally {
          await kernel.close();
        }
      }), { numRuns: Number(process.env.KPNG_FAULT_RUNS ?? 12) });
    }
    expect(seen.refused).toBeGreaterThan(3);
    expect(seen.lost).toBeGreaterThan(3);
    expect(seen.partial).toBe(0);
  }, 480000);
});

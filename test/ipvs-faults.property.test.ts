// Property: the IPVS dataplane (inside the shared KernelSink, as the ipvs backend runs it) heals from
// kernel errors. Random cluster changes go through the real model to a faulty fake of its kernel
// (src/backend/ipvs/faulty.ts: IPVS messages refused or with their replies lost, address changes
// refused, the companion nftables batch rejected); once the errors stop, the next sync leaves the
// same virtual servers, real servers and addresses as a clean full sync of the final state on a
// fresh kernel. IPVS has no transactions: between a failure and the repair a packet can meet a
// partly updated table (the nft backend's property, test/nft-faults.property.test.ts, proves more).
import fc from 'fast-check';
import { IpvsDataplane } from '../src/backend/ipvs/dataplane';
import { KernelSink } from '../src/backend/kernel/kernel-sink';
import type { Service } from '../src/model/enls';
import { modelOptions } from '../src/model/options';
import { action, applyAction, nodeObject, options } from './helpers/cluster-actions';
import { FakeIpvsKernel } from '../src/backend/ipvs/fake';
import { FaultyIpvsKernel } from '../src/backend/ipvs/faulty';
import { cluster } from './helpers/k8s';
import { SinkDriver } from './helpers/sink-driver';

const NODE_IP = '192.168.0.2';

const dataplane = (fake: FakeIpvsKernel) => new IpvsDataplane({
  scheduler: 'rr', interface: 'kube-ipvs0', table: 'kpng-ipvs', drainCheckMs: 0, log: () => {}, kernel: fake, paths: fake,
  settings: { strictArp: false, timeouts: { tcp: 0, tcpFin: 0, udp: 0 }, excludeCIDRs: [] },
});

/**
 * The kernel's virtual servers and addresses, real servers being drained (weight 0) left out. Firewall
 * marks are numbered in the order a dataplane allocated them: compared without their number.
 */
const served = (k: FakeIpvsKernel): string[] => k.text().map((l) => {
  const at = l.indexOf(' -> ');
  if (at < 0) return l;
  return `${l.slice(0, at).replace(/^fwm\/(ip6?)\/\d+/, 'fwm/$1/*')} -> ${l.slice(at + 4).split(', ').filter((d) => d && !d.endsWith(' w0')).join(', ')}`;
}).sort();

describe('kernel faults: the IPVS dataplane converges once they stop', () => {
  test('random changes, random refused and lost IPVS messages, address and companion-table errors', async () => {
    let injected = 0, failures = 0;
    await fc.assert(fc.asyncProperty(options, fc.array(action, { minLength: 1, maxLength: 10 }), fc.integer({ min: 1, max: 1 << 30 }), async (opts, actions, seed) => {
      const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions(opts) });
      const kernel = new FaultyIpvsKernel([NODE_IP], 0.15, seed);
      const sink = new KernelSink(dataplane(kernel), { log: () => {} });
      const driver = new SinkDriver(c.state);
      const attempt = async (): Promise<boolean> => {
        const { batch, view } = driver.next();
        try {
          await sink.apply(batch, view);
          return true;
        } catch {
          return false;
        }
      };
      await attempt();
      for (const a of actions) {
        applyAction(c, a);
        await attempt();
      }
      injected += kernel.injected.length;
      failures += sink.stats.failures;
      kernel.faulty = false;
      expect(await attempt()).toBe(true);
      const clean = new FakeIpvsKernel([NODE_IP]);
      const items = [...c.state.items()];
      await dataplane(clean).fullSync(items.flatMap((i) => (i.service ? [i.service] : [])) as Service[], items.find((i) => i.node)?.node ?? undefined);
      expect(served(kernel)).toEqual(served(clean));
      // Not the companion table's dump: two services whose fwmark hashes collide take N and N+1 in the
      // order they were planned, which a retried sync may change; what is served is the same (above).
    }), { numRuns: 100 });
    expect(injected).toBeGreaterThan(50);
    expect(failures).toBeGreaterThan(20);
  });
});

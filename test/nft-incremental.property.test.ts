// Property: random sequences of cluster changes, turned into ENLS changes by the real model and applied
// incrementally by the nft backend's planner (updateService + OpCollector on long-lived TableModels,
// a full resync when the node item changes, as KernelSink does), leave the same table content as one
// full sync of the final state, and every packet meets the same fate in both.
import fc from 'fast-check';
import { fullSyncOps, OpCollector, settleSharedChains, TableModel, updateService } from '../src/backend/nft/plan';
import type { IpFamily, FamOps } from '../src/backend/nft/types';
import { NODE_KEY, Target, type NodeInfo, type Route, type Routes, type Service, type ServicePort } from '../src/model/enls';
import { modelOptions } from '../src/model/options';
import { itemHash } from '../src/store/item-store';
import { cluster } from './helpers/k8s';
import { action, applyAction, epIP, nodeObject, options, sliceObject, svcObject } from './helpers/cluster-actions';
import { FakeNft, inCidr, tableContent } from '../src/backend/nft/fake';
import { Tracer, type Packet } from './helpers/nft-tracer';
import { brief, enlsOf, renderFull } from './helpers/nft-world';

const FAMS: IpFamily[] = ['ip', 'ip6'];

/** The incremental side: long-lived models, as NftDataplane + KernelSink keep them. */
class Incremental {
  nft = new FakeNft();
  models: Record<IpFamily, TableModel> = { ip: new TableModel('ip'), ip6: new TableModel('ip6') };
  hashes = new Map<string, string>();
  node: NodeInfo | undefined;
  incrementalBatches = 0;

  sync(items: Array<{ key: string; service?: Service | null; node?: NodeInfo | null }>): void {
    const now = new Map(items.map((it) => [it.key, itemHash(it)]));
    const changed = [...new Set([...now.keys(), ...this.hashes.keys()])].filter((k) => now.get(k) !== this.hashes.get(k));
    const { services, node } = enlsOf({ items: () => items });
    if (this.hashes.size === 0 || changed.includes(NODE_KEY)) {
      this.models = { ip: new TableModel('ip'), ip6: new TableModel('ip6') };
      this.nft.apply(FAMS.map((fam) => ({ fam, ops: fullSyncOps(this.models[fam], services, node) })));
    } else if (changed.length) {
      const byKey = new Map(services);
      const coll: Record<IpFamily, OpCollector> = { ip: new OpCollector(), ip6: new OpCollector() };
      for (const key of changed) for (const fam of FAMS) updateService(this.models[fam], key, byKey.get(key), node, coll[fam]);
      for (const fam of FAMS) settleSharedChains(this.models[fam], coll[fam]);
      const ops: FamOps[] = FAMS.filter((f) => !coll[f].empty).map((fam) => ({ fam, ops: coll[fam].ops() }));
      if (ops.length) { this.nft.apply(ops); this.incrementalBatches++; }
    }
    this.hashes = now;
    this.node = node;
  }
}

/** Packets worth comparing: every service destination (and an unserved port) from every kind of client. */
function packets(services: Array<[string, Service]>, nodeInfo: NodeInfo | undefined): Packet[] {
  const out: Packet[] = [];
  const sources = { ip: ['10.0.0.2', '10.180.0.1', '192.168.0.2', '203.0.113.2', '203.0.113.130'], ip6: ['fd00:10::2', 'fd00:10::1:1', '2001:db8::2', '2001:db8:ffff::2'] };
  const nodeIPs = ['192.168.0.2', '192.168.1.2', '2001:db8::2'];
  for (const [, s] of services) {
    for (const sp of s.ports) {
      const v6 = sp.family === 2;
      const proto = sp.port.protocol === 2 ? 'udp' as const : 'tcp' as const;
      const dsts: Array<[string, number]> = [];
      for (const a of [...(v6 ? s.clusterIps.v6 : s.clusterIps.v4), ...(v6 ? s.externalIps.v6 : s.externalIps.v4), ...(v6 ? s.loadBalancerIps.v6 : s.loadBalancerIps.v4)]) {
        dsts.push([a, sp.port.port], [a, 9999]);
      }
      if (sp.port.nodePort) for (const a of nodeIPs.filter((x) => x.includes(':') === v6)) dsts.push([a, sp.port.nodePort]);
      for (const [dst, dport] of dsts) for (const src of sources[v6 ? 'ip6' : 'ip']) out.push({ src, dst, dport, proto });
    }
  }
  void nodeInfo;
  return out;
}

describe('incremental nft updates equal a full sync', () => {
  test('same table content and same packet fates after random change sequences', () => {
    let batches = 0;
    const seen = new Map<string, number>();
    const count = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);
    fc.assert(fc.property(options, fc.array(action, { minLength: 1, maxLength: 14 }), (opts, actions) => {
      const c = cluster('n1', [nodeObject('zone-a', false)], { model: modelOptions(opts) });
      const inc = new Incremental();
      inc.sync([...c.state.items()]);
      for (const a of actions) {
        applyAction(c, a);
        inc.sync([...c.state.items()]);
      }
      batches += inc.incrementalBatches;
      if (c.warnings.length) count('warning');
      for (const [, s] of enlsOf(c.state).services) if (s.sessionAffinity) count('affinity');
      const { services, node: nodeInfo } = enlsOf(c.state);
      const full = renderFull(services, nodeInfo);
      for (const fam of FAMS) {
        const got = tableContent(inc.nft.tables[fam]);
        expect(got).toEqual(tableContent(full.tables[fam]));
      }
      const local = nodeInfo?.addresses ?? [];
      const ti = new Tracer(inc.nft, { localAddrs: local });
      const tf = new Tracer(full, { localAddrs: local });
      for (const p of packets(services, nodeInfo)) {
        const want = tf.trace(p);
        expect(`${p.src} -> ${p.dst}:${p.dport}/${p.proto}: ${brief(ti.trace(p))}`).toBe(`${p.src} -> ${p.dst}:${p.dport}/${p.proto}: ${brief(want)}`);
        count(`${want.verdict}${want.masqueraded === true ? '+masq' : ''}`);
      }
    }), { numRuns: 150 });
    // The property exercised the incremental path, not only full syncs.
    expect(batches).toBeGreaterThan(150);
    // ...and packets met every fate (the generator is not stuck on one kind of service).
    for (const k of ['DNAT', 'DNAT+masq', 'DROP', 'REJECT', 'ACCEPT', 'affinity']) expect([k, seen.get(k) ?? 0]).not.toEqual([k, 0]);
    expect(seen.get('warning') ?? 0).toBe(0);
  });
});

// A second property: what the table does is what the ENLS says. For every destination of every port
// and every kind of client, the traced fate equals the route the model computed (endpoints or REJECT /
// DROP, masquerade, plus the LB firewall, the hairpin rule and rejection of unserved cluster-IP ports).
// Hairpin: a client that is itself an endpoint on this node (`local`) is masqueraded when DNATed to
// itself; the set is shared, so an address local in any service counts.
// This is the "backends are pure renderers" contract, checked on random services.
function expectedFate(s: Service, sp: ServicePort, rs: Routes | null, dst: string, p: Packet, node: NodeInfo | undefined, isLB: boolean, localEps: Set<string>): string {
  const v6 = sp.family === 2;
  if (!rs) return 'none';
  const allowed = v6 ? s.loadBalancerAllowedSources.v6 : s.loadBalancerAllowedSources.v4;
  if (isLB && sp.loadBalancerFirewall && !allowed.some((c) => inCidr(p.src, c))) return 'DROP';
  const pods = node ? (v6 ? node.podCidrs.v6 : node.podCidrs.v4) : [];
  const local = (node?.addresses ?? []).includes(p.src);
  const route: Route = pods.some((c) => inCidr(p.src, c)) ? rs.pod : local ? rs.node : rs.other;
  if (route.target === Target.REJECT) return 'REJECT';
  if (route.target === Target.DROP) return 'DROP';
  const eps = (route.target === Target.LOCAL ? sp.localEndpoints : sp.clusterEndpoints).map((e) => (e.ip.includes(':') ? `[${e.ip}]:${e.port}` : `${e.ip}:${e.port}`));
  const uniq = [...new Set(eps)].sort();
  const hairpin = localEps.has(p.src) ? uniq.filter((e) => e.startsWith(p.src.includes(':') ? `[${p.src}]` : `${p.src}:`)) : [];
  const masq = route.masquerade || (hairpin.length > 0 && hairpin.length === uniq.length) ? ' masq' : hairpin.length ? ' masq?' : '';
  void dst;
  return `DNAT ${uniq.join(',')}${masq}`;
}

describe('the rendered table does what the ENLS says', () => {
  test('every destination, every client class, random services and options', () => {
    let checked = 0;
    fc.assert(fc.property(options, fc.array(action, { minLength: 1, maxLength: 10 }), (opts, actions) => {
      const c = cluster('n1', [nodeObject('zone-a', true)], { model: modelOptions(opts) });
      for (const a of actions) {
        if (a.k === 'svc') c.add(svcObject(a.i, a.spec));
        else if (a.k === 'slice') c.add(sliceObject(a));
      }
      const { services, node: nodeInfo } = enlsOf(c.state);
      const nft = renderFull(services, nodeInfo);
      const tracer = new Tracer(nft, { localAddrs: nodeInfo?.addresses ?? [] });
      const localEps = new Set(services.flatMap(([, s]) => s.ports.flatMap((sp) => [...sp.clusterEndpoints, ...sp.localEndpoints].filter((e) => e.local).map((e) => e.ip))));
      // Every endpoint address is also a client (hairpin), besides a pod, the node and outside.
      const epSources = (v6: boolean) => [0, 1, 2, 3, 4, 5].map((k) => epIP(k, v6));
      const sources = { ip: ['10.0.0.2', '192.168.0.2', '203.0.113.2', '203.0.113.130', ...epSources(false)], ip6: ['fd00:10::2', '2001:db8::2', '2001:db8:ffff::2', ...epSources(true)] };
      for (const [, s] of services) {
        for (const sp of s.ports) {
          const v6 = sp.family === 2;
          const fam = v6 ? 'v6' as const : 'v4' as const;
          const proto = sp.port.protocol === 2 ? 'udp' as const : 'tcp' as const;
          const npCidrs = nodeInfo ? nodeInfo.nodePortAddresses[fam] : [];
          const dsts: Array<[string, number, Routes | null, boolean]> = [
            ...s.clusterIps[fam].map((a): [string, number, Routes | null, boolean] => [a, sp.port.port, sp.clusterIp, false]),
            ...s.externalIps[fam].map((a): [string, number, Routes | null, boolean] => [a, sp.port.port, sp.externalIp, false]),
            ...s.loadBalancerIps[fam].map((a): [string, number, Routes | null, boolean] => [a, sp.port.port, sp.loadBalancerIp, true]),
            ...(sp.port.nodePort ? (nodeInfo?.addresses ?? []).filter((a) => a.includes(':') === v6 && npCidrs.some((cidr) => inCidr(a, cidr)))
              .map((a): [string, number, Routes | null, boolean] => [a, sp.port.nodePort, sp.nodePort, false]) : []),
          ];
          for (const [dst, dport, rs, isLB] of dsts) {
            for (const src of sources[v6 ? 'ip6' : 'ip']) {
              const p: Packet = { src, dst, dport, proto };
              expect(`${src} -> ${dst}:${dport}/${proto}: ${brief(tracer.trace(p))}`).toBe(`${src} -> ${dst}:${dport}/${proto}: ${expectedFate(s, sp, rs, dst, p, nodeInfo, isLB, localEps)}`);
              checked++;
            }
          }
          // A port the cluster IP does not serve is rejected.
          for (const a of s.clusterIps[fam]) {
            if (s.ports.some((o) => o.family === sp.family && o.port.port === 9999)) continue;
            expect(brief(tracer.trace({ src: sources[v6 ? 'ip6' : 'ip'][0], dst: a, dport: 9999, proto }))).toBe('REJECT');
          }
        }
      }
    }), { numRuns: 150 });
    expect(checked).toBeGreaterThan(1000);
  });
});

// IPVS backend benchmark. Needs a kernel with IPVS: run it in the qemu guest (`npm run bench:ipvs`, which
// calls hack/qemu/run.sh). Prints figures, never asserts on time. The guest is an emulated CPU (TCG), so
// every figure is labelled as a guest figure, and the nft backend is measured in the same guest beside it.
//   1. Full sync of N services x 10 endpoints into fresh network namespaces: ipvs vs nft.
//   2. A second full sync with nothing changed (the periodic resync: reconciled against a kernel dump).
//   3. One endpoint change (one endpoint of one service replaced): time to the kernel's ack, messages.
// Rows: ipvs (direct), ipvs+aggregator (companion table and IPVS messages through an Aggregator as
// producer "kpng", min interval 0: the aggregator's own cost, no waiting), nft.
// Run: node dist/bench/ipvs-sync.bench.js [--services 10000] [--endpoints 10] [--changes 20]
import * as os from 'node:os';
import { EndpointList, type Service } from '../src/model/enls';
import type { Dataplane, SyncReport } from '../src/backend/kernel/dataplane';
import { IpvsDataplane } from '../src/backend/ipvs/dataplane';
import { NftDataplane } from '../src/backend/nft/sink';
import { nativeKernel } from '../src/backend/nft';
import { Aggregator } from '../src/aggregator/aggregator';
import { nativeTransport } from '../src/nft/transport';
import { ipvsApply } from '../src/native/ipvs';
import { NetLab, nsPath } from '../test/shared/netlab';
import { enlsNode, enlsService, ip4 } from '../test/shared/objects';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const SERVICES = Number(arg('--services', '10000'));
const ENDPOINTS = Number(arg('--endpoints', '10'));
const CHANGES = Number(arg('--changes', '20'));
// Node n1 with no node-port addresses (the rows compare cluster IPs only).
const NODE = enlsNode({ v4: [], v6: [] });

// Fresh namespaces on the lab fixture (KPNG_LAB_PREFIX names them), removed on exit.
const lab = new NetLab('kbi-bench');
let made = 0;
function netns(): string {
  const n = lab.netns(String(made++));
  // IPVS refuses real servers it cannot route to (EINVAL): a default route through a dummy link.
  lab.ip(n, 'link', 'add', 'd0', 'type', 'dummy');
  lab.ip(n, 'link', 'set', 'd0', 'up');
  lab.ip(n, 'route', 'add', 'default', 'dev', 'd0');
  return nsPath(n);
}

const service = (i: number): Service => enlsService(i, { endpoints: ENDPOINTS }).service!;

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const f1 = (x: number) => x.toFixed(1);

async function timed(f: () => Promise<SyncReport>): Promise<{ ms: number; r: SyncReport }> {
  const t0 = performance.now();
  const r = await f();
  return { ms: performance.now() - t0, r };
}

async function measure(name: string, make: (netns: string) => Dataplane, services: Service[]) {
  const dp = make(netns());
  const full = await timed(() => dp.fullSync(services, NODE, 1));
  const again = await timed(() => dp.fullSync(services, NODE, 2));
  const times: number[] = [];
  let msgs = 0;
  for (let c = 0; c < CHANGES; c++) {
    const i = (c * 7919) % services.length;
    const old = services[i];
    // One endpoint replaced by a new one (the others stay).
    const eps = old.ports[0].clusterEndpoints.toArray();
    eps[ENDPOINTS - 1] = { ...eps[ENDPOINTS - 1], ip: ip4(((10 << 24) | (201 << 16)) + c + 1) };
    const next: Service = { ...old, ports: [{ ...old.ports[0], clusterEndpoints: EndpointList.from(eps) }] };
    const one = await timed(() => dp.update([{ key: `svc/bench/s${i}`, old, new: next }], NODE, 3 + c));
    services[i] = next;
    times.push(one.ms);
    msgs += one.r.messages;
  }
  await dp.close?.();
  return { name, full, again, p50: pct(times, 50), p99: pct(times, 99), msgs: msgs / CHANGES };
}

async function main(): Promise<void> {
  const guest = process.env.KPNG_IN_GUEST === '1';
  console.log(`ipvs-sync bench: ${SERVICES} services x ${ENDPOINTS} endpoints, ${CHANGES} single-endpoint changes; ` +
    `kernel ${os.release()}, ${guest ? 'INSIDE THE QEMU TCG GUEST (emulated CPU: not comparable with host figures)' : 'host'}`);
  const services = () => Array.from({ length: SERVICES }, (_, i) => service(i));
  // Warm-up in a throwaway namespace: the first sync of the run loads kernel modules (IPVS scheduler,
  // nft expressions), which under the emulated CPU would be charged to whichever row comes first.
  const warm: Array<(ns: string) => Dataplane> = [(ns: string) => new IpvsDataplane({ scheduler: 'rr', interface: 'kube-ipvs0', table: 'kpng-ipvs', drainCheckMs: 0, netns: ns, log: () => {} }),
    (ns: string) => new NftDataplane('kpng', nativeKernel({ netns: ns }))];
  for (const make of warm) {
    const dp = make(netns());
    await dp.fullSync(Array.from({ length: 10 }, (_, i) => service(i)), NODE, 1);
    await dp.close?.();
  }
  const rows = [];
  rows.push(await measure('ipvs', (ns) => new IpvsDataplane({ scheduler: 'rr', interface: 'kube-ipvs0', table: 'kpng-ipvs', drainCheckMs: 0, netns: ns, log: () => {} }), services()));
  rows.push(await measure('ipvs+aggregator', (ns) => {
    const agg = new Aggregator({ transport: nativeTransport({ netns: ns }), ipvs: { apply: (ops) => ipvsApply(ops, { netns: ns }) }, minIntervalMs: 0 });
    const kpng = agg.connect('kpng');
    return new IpvsDataplane({
      scheduler: 'rr', interface: 'kube-ipvs0', table: 'kpng-ipvs', drainCheckMs: 0, netns: ns, log: () => {},
      paths: { nft: { apply: async (ops) => ({ ...(await kpng.apply(ops)), encodeMs: 0 }) }, ipvs: (ops) => agg.ipvs!.send('kpng', ops) },
    });
  }, services()));
  rows.push(await measure('nft', (ns) => new NftDataplane('kpng', nativeKernel({ netns: ns })), services()));
  const head = ['backend', 'full sync ms', 'messages', 'resync ms', 'resync msgs', 'change p50 ms', 'change p99 ms', 'msgs/change'];
  const data = rows.map((r) => [r.name, f1(r.full.ms), r.full.r.messages, f1(r.again.ms), r.again.r.messages, f1(r.p50), f1(r.p99), f1(r.msgs)]);
  const w = head.map((h, i) => Math.max(h.length, ...data.map((d) => String(d[i]).length)));
  const line = (r: (string | number)[]) => r.map((c, i) => String(c).padStart(w[i])).join('  ');
  console.log(line(head));
  console.log(w.map((x) => '-'.repeat(x)).join('  '));
  for (const d of data) console.log(line(d));
  const [ipvs, agg, nft] = rows;
  console.log(`ratios ipvs/nft (same guest): full sync ${(ipvs.full.ms / nft.full.ms).toFixed(2)}x, one change p50 ${(ipvs.p50 / nft.p50).toFixed(2)}x`);
  console.log(`ratios ipvs+aggregator/ipvs (same guest): full sync ${(agg.full.ms / ipvs.full.ms).toFixed(2)}x, resync ${(agg.again.ms / ipvs.again.ms).toFixed(2)}x, one change p50 ${(agg.p50 / ipvs.p50).toFixed(2)}x`);
}

main().catch((e) => { console.error(e); process.exit(1); });

// eBPF socket-LB benchmark (root; prints tables, never asserts on time).
//   1. Full sync of N services x 10 endpoints into empty, pinned maps: time, syscalls, bytes, and the
//      kernel's memory for the maps (memlock in /proc/self/fdinfo); the nft dataplane's full sync of
//      the same services into a fresh network namespace as the reference, in the same run. Both syncs
//      are timed the same way: the wall clock around the dataplane's fullSync() (plan, encode, kernel),
//      each dataplane already made. The eBPF programs' load and attach (the loader's open, which kpng
//      overlaps with the initial lists) is timed on its own and shown beside, never inside the ratio.
//   2. One endpoint change in that state: update() -> maps written, p50/p99 and syscalls per change.
// Programs attach to a throwaway cgroup (kbf-bench-*, the lab fixture's) that no process joins; pins go to
// /sys/fs/bpf/kbf-bench-*; everything is removed at the end.
// Run: npm run build && node dist/bench/ebpf-sync.bench.js [--sizes 10,1000,10000,50000] [--changes 200] [--prealloc]
//   --prealloc: the service and backend maps preallocated (kpng's --ebpf-prealloc)
import * as fs from 'node:fs';
import type { Service } from '../src/model/enls';
import { EbpfDataplane } from '../src/backend/ebpf';
import { NftDataplane } from '../src/backend/nft/sink';
import { nativeKernel } from '../src/backend/nft';
import { EbpfLoader, ebpfCleanup } from '../src/native/ebpf';
import { enlsNode, enlsService } from '../test/shared/objects';
import { NetLab } from '../test/shared/netlab';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const SIZES = arg('--sizes', '10,1000,10000,50000').split(',').map(Number);
const CHANGES = Number(arg('--changes', '200'));
const PREALLOC = args.includes('--prealloc');
const NODE = enlsNode({ v4: ['0.0.0.0/0'], v6: [] });
const lab = new NetLab('kbf-bench');
const service = (i: number, shift = 0): Service => enlsService(i, { shift, masquerade: false }).service!;

/** memlock of this process's BPF maps by name, from /proc/self/fdinfo (kernel >= 6.4: actual usage). */
function mapMemory(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const fd of fs.readdirSync('/proc/self/fdinfo')) {
    let text = '';
    try { text = fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'); } catch { continue; }
    const mem = /^memlock:\s+(\d+)/m.exec(text), mapId = /^map_id:\s+(\d+)/m.exec(text);
    if (mem && mapId) out[mapId[1]] = Number(mem[1]);
  }
  return out;
}

const pct = (xs: number[], p: number) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const mib = (n: number) => (n / 1048576).toFixed(1);

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) { console.log('ebpf-sync bench: needs root'); return; }
  const CG = lab.cgroup('cg');
  console.log(`eBPF socket-LB maps vs nft, ${new Date().toISOString().slice(0, 10)}, ${process.platform} ${fs.readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}${PREALLOC ? ', service and backend maps preallocated' : ''}`);
  console.log('| services x 10 eps | ebpf load + attach | ebpf full sync | syscalls | bytes | nft full sync (ref) | sync ratio ebpf / nft | map memory | 1 change p50 / p99 | syscalls/change |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  try {
    for (const n of SIZES) {
      const pin = `/sys/fs/bpf/${lab.name(`pin-${n}`)}`;
      const svcs = Array.from({ length: n }, (_, i) => service(i));
      const before = mapMemory();
      const entries = Math.max(262144, n * 12);
      // Load and attach first, timed on their own: the sync below then times the same span as nft's.
      const tOpen = performance.now();
      const loader = EbpfLoader.open({ cgroup: CG, pinDir: pin, mapEntries: entries, prealloc: PREALLOC });
      let openMs = NaN;
      void loader.then(() => { openMs = performance.now() - tOpen; }, () => {});
      // Its log says when services do not fit (they would be left to nft and the figures would be of a part).
      const dp = new EbpfDataplane(() => loader, (m) => { if (/full/.test(m)) console.error(m); }, entries);
      try {
        await loader;
        const t0 = performance.now();
        const full = await dp.fullSync(svcs, NODE);
        const syncMs = performance.now() - t0;
        const mem = Object.entries(mapMemory()).filter(([k]) => !(k in before)).reduce((a, [, v]) => a + v, 0);
        const times: number[] = [];
        let syscalls = 0;
        for (let c = 0; c < CHANGES; c++) {
          const i = (c * 7919) % n;
          const old = svcs[i];
          svcs[i] = service(i, c + 1);
          const t0 = performance.now();
          const r = await dp.update([{ key: `svc/bench/s${i}`, old, new: svcs[i] }], NODE);
          times.push(performance.now() - t0);
          syscalls += r.messages;
        }
        // The reference: the nft dataplane, same services, fresh namespace.
        const ns = lab.netns(`nft-${n}`);
        let nftMs = 0;
        try {
          const nft = new NftDataplane('kpng-kbf-bench', nativeKernel({ netns: `/var/run/netns/${ns}` }));
          const t0 = performance.now();
          await nft.fullSync(svcs, NODE);
          nftMs = performance.now() - t0;
        } finally {
          lab.removeNetns(ns);
        }
        console.log(`| ${n} | ${openMs.toFixed(1)} ms | ${syncMs.toFixed(1)} ms | ${full.messages} | ${full.bytes} | ${nftMs.toFixed(1)} ms | ${(syncMs / nftMs).toFixed(2)} | ${mib(mem)} MiB | ${pct(times, 0.5).toFixed(2)} / ${pct(times, 0.99).toFixed(2)} ms | ${(syscalls / CHANGES).toFixed(1)} |`);
      } finally {
        await dp.close();
        await ebpfCleanup(pin);
      }
    }
  } finally {
    lab.destroy();
  }
  console.log('full sync: the wall clock around fullSync() on both sides (plan, encode, kernel); ebpf load + attach: the loader\'s open (programs loaded, maps made and pinned, attached to the cgroup), before its sync and outside the ratio.');
  console.log('map memory: memlock of the five maps as the kernel reports it (service and backend maps sized max(262144, 12 x services); LRU maps preallocated: reverse NAT and affinity 65536 entries each).');
}

main().catch((e) => { console.error(e); process.exitCode = 1; });

// A node's first full sync from a cluster file, as an operator runs kpng (root; prints tables, never
// asserts on time): `kpng file --input FILE --node n1 --once --to BACKEND` started once per run in a
// fresh network namespace (and, for ebpf, a fresh cgroup and pin directory), the backends alternating
// run by run so that a noisy minute falls on both. The sync's wall time is kpng's own (its log line:
// from the sink's first state to the kernel's last ack, both parts for --to ebpf, each part's own time
// beside); the peak RSS is the process's VmHWM, read until it exits.
// The cluster file has the shape of bench:vs-upstream's synthetic cluster: N services of one TCP port,
// E ready endpoints each, one pod IP per endpoint, spread round-robin over 10 nodes (n1 holds a tenth).
// Run: npm run build && node dist/bench/file-sync.bench.js [--services 50000] [--endpoints 10] [--runs 4]
//        [--backends nft,ebpf] [--prealloc] [--keep-file]
//   --prealloc: the ebpf runs pass --ebpf-prealloc (kpng's preallocated service and backend maps)
//   --keep-file: the generated cluster file stays (its path is printed)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { node, slice, svc, ep } from '../test/shared/objects';
import { NetLab } from '../test/shared/netlab';
import { helpIfAsked } from './help';
import { spread } from './vs-upstream/report';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string): string => { const i = args.indexOf(name); return i >= 0 && args[i + 1] ? args[i + 1]! : def; };
const SERVICES = Number(arg('--services', '50000'));
const ENDPOINTS = Number(arg('--endpoints', '10'));
const RUNS = Number(arg('--runs', '4'));
const BACKENDS = arg('--backends', 'nft,ebpf').split(',').filter(Boolean);
const PREALLOC = args.includes('--prealloc');
const NODES = 10;
const KPNG = path.join(__dirname, '..', '..', 'bin', 'kpng.js');

/** An IPv4 address from a 32-bit number. */
const ip4 = (n: number): string => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;

/** The cluster file: Nodes n1..n10, then each Service with its EndpointSlice. */
function writeCluster(file: string): number {
  const items: unknown[] = [];
  for (let i = 1; i <= NODES; i++) items.push(node(`n${i}`, `zone-${'abc'[(i - 1) % 3]}`, { addresses: [{ type: 'InternalIP', address: `192.168.0.${i}` }] }));
  let pod = 0;
  for (let s = 0; s < SERVICES; s++) {
    const name = `svc-${s}`;
    // Cluster IPs from 10.96.0.10 and pod IPs from 10.244.0.0, as the synthetic cluster's.
    items.push(svc(name, { clusterIPs: [ip4(((10 << 24) | (96 << 16)) + 10 + s)], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] }));
    const eps = Array.from({ length: ENDPOINTS }, () => {
      const k = pod++;
      return ep(ip4(((10 << 24) | (244 << 16)) + 1 + k), { ready: true, serving: true, terminating: false, node: `n${(k % NODES) + 1}`, pod: `${name}-${k}` });
    });
    items.push(slice(`${name}-abcde`, name, eps));
  }
  fs.writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  return fs.statSync(file).size;
}

/** kpng's log line of a full sync: its kernel time, wall time and, for parts, each part's time. */
interface Sync { wallMs: number; kernelMs: number; parts: Record<string, number> }
const SYNC_LINE = /full \((\d+) services[^)]*\) sync, \d+ messages, \d+ bytes, ([\d.]+) ms \(([\d.]+) ms wall(?:: ([^)]*))?\)/;

function parseSync(log: string): Sync | undefined {
  const m = SYNC_LINE.exec(log);
  if (!m) return undefined;
  const parts: Record<string, number> = {};
  for (const p of (m[4] ?? '').split(', ').filter(Boolean)) {
    const [name, ms] = p.split(' ');
    parts[name!] = Number(ms);
  }
  return { wallMs: Number(m[3]), kernelMs: Number(m[2]), parts };
}

/** The process's VmHWM (peak RSS) in MiB, undefined once it is gone. */
function peakRss(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** --ebpf-map-entries: the service map's entries (slot 0 and one per endpoint) and a quarter to spare, as kpng advises. */
const mapEntries = (): number => Math.max(262144, Math.ceil((SERVICES * (ENDPOINTS + 1) * 1.25) / 1024) * 1024);

interface Run { backend: string; sync: Sync; peakMiB: number }

async function runOnce(lab: NetLab, backend: string, file: string, n: number): Promise<Run> {
  const ns = lab.netns(`${backend}${n}`);
  const extra: string[] = [];
  let pin: string | undefined;
  if (backend === 'ebpf') {
    pin = `/sys/fs/bpf/${lab.name(`pin${n}`)}`;
    extra.push('--cgroup', lab.cgroup(`cg${n}`), '--bpffs', pin, '--ebpf-map-entries', String(mapEntries()));
    if (PREALLOC) extra.push('--ebpf-prealloc');
  }
  const child = lab.spawnIn(ns, process.execPath, [KPNG, 'file', '--input', file, '--node', 'n1', '--once', '--to', backend, ...extra]);
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  // nsenter execs kpng in place (no fork for a network namespace): the child's pid is kpng's.
  let peak = 0;
  const timer = setInterval(() => { peak = Math.max(peak, peakRss(child.pid!) ?? 0); }, 20);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearInterval(timer);
  lab.removeNetns(ns);
  if (pin) fs.rmSync(pin, { recursive: true, force: true });
  const sync = parseSync(log);
  if (code !== 0 || !sync) throw new Error(`kpng --to ${backend} exited ${code} without a full sync line:\n${log.slice(-2000)}`);
  return { backend, sync, peakMiB: peak };
}

/** "median UNIT (min-max)" of some values. */
const withRange = (xs: number[], unit: string): string => { const s = spread(xs); return `${s.median.toFixed(0)} ${unit} (${s.min.toFixed(0)}-${s.max.toFixed(0)})`; };

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) { console.log('file-sync bench: needs root (network namespaces, cgroups, BPF)'); return; }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-file-sync-'));
  const file = path.join(dir, `c${SERVICES}x${ENDPOINTS}.json`);
  const bytes = writeCluster(file);
  console.log(`first full sync from a file, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} CPUs, kernel ${os.release()}: ` +
    `${SERVICES} services x ${ENDPOINTS} endpoints over ${NODES} nodes (${(bytes / 1048576).toFixed(0)} MB of JSON)${PREALLOC ? ', ebpf with --ebpf-prealloc' : ''}`);
  const lab = new NetLab('kfs-bench');
  const runs: Run[] = [];
  try {
    console.log('| run | backend | sync wall | kernel | parts | peak RSS |');
    console.log('|---|---|---|---|---|---|');
    for (let n = 0; n < RUNS; n++) {
      // Alternating, the first backend changing with the run: neither always runs on a cold page cache.
      const order = n % 2 === 0 ? BACKENDS : BACKENDS.slice().reverse();
      for (const b of order) {
        const r = await runOnce(lab, b, file, n);
        runs.push(r);
        const parts = Object.entries(r.sync.parts).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ');
        console.log(`| ${n + 1} | ${b} | ${r.sync.wallMs.toFixed(0)} ms | ${r.sync.kernelMs.toFixed(0)} ms | ${parts || '-'} | ${r.peakMiB.toFixed(0)} MiB |`);
      }
    }
  } finally {
    lab.destroy();
    if (args.includes('--keep-file')) console.log(`cluster file kept: ${file}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log('\n| backend | sync wall, median (range) | peak RSS, median (range) |');
  console.log('|---|---|---|');
  const med: Record<string, number> = {};
  for (const b of BACKENDS) {
    const mine = runs.filter((r) => r.backend === b);
    const wall = mine.map((r) => r.sync.wallMs), peak = mine.map((r) => r.peakMiB);
    med[b] = spread(wall).median;
    console.log(`| ${b} | ${withRange(wall, 'ms')} | ${withRange(peak, 'MiB')} |`);
  }
  if (med.nft && med.ebpf) console.log(`\nebpf / nft sync wall (medians): ${(med.ebpf / med.nft).toFixed(2)}`);
}

main().catch((e) => { console.error(e); process.exit(1); });

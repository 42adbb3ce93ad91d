// The nft fast path (--nft-flowtable) against the same ruleset without it, with real traffic: TCP stream
// (MB/s), TCP request/response on one connection (transactions/s) and TCP connection rate (a new
// connection per request, connections/s), each through two service paths of the lab cluster
// (test/e2e/lab):
//   ClusterIP: a pod on n1 -> cluster IP -> the endpoint on n2 (n1 DNATs and forwards, n2 routes)
//   NodePort:  an outside client -> n1's node port -> the endpoint on n1 (DNAT, masquerade, forward)
// kpng (`kpng file --to nft`, the CLI from dist/) runs on n1, restarted between the two modes; the
// modes take turns in a rotating order, every cell is the median of --runs runs of --seconds each.
// The traffic generator is bench/ebpf-traffic.c (C: a Node client would cost more than the path).
// Runs inside the qemu guest (this machine's kernel has no flowtables; Debian's 6.1 under TCG, one
// vCPU, so every namespace shares one emulated CPU: ratios, not absolute figures); started on the host,
// it builds the generator there and re-runs itself in the guest. Also reported: guest CPU-seconds per
// gigabit during the stream (one vCPU: every namespace's share, the forwarding node's included).
// Run: npm run bench:fast-path [-- --seconds 5 --runs 3 --packets 20]
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Lab, ADDR } from '../test/e2e/lab/lab';
import { Kpng } from '../test/e2e/lab/kpng';
import { StateFile, type SvcSpec } from '../test/e2e/lab/world';
import { helpIfAsked } from './help';
import { spread } from './vs-upstream/report';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 && args[i + 1] ? args[i + 1]! : def; };
const SECONDS = Number(arg('--seconds', '5'));
const RUNS = Number(arg('--runs', '3'));
const PACKETS = arg('--packets', '20');
const ROOT = path.resolve(__dirname.includes(`${path.sep}dist${path.sep}`) ? path.join(__dirname, '../..') : path.join(__dirname, '..'));
// Built on the host (compiling under the emulated CPU is slow); the guest sees the host's files.
const BIN = path.join(ROOT, '.cache/bench-bin/ebpf-traffic');
const PORT = 8090;

const services: SvcSpec[] = [
  { name: 'far', clusterIPs: ['10.96.0.40'], ports: [{ port: 80, targetPort: PORT }], pods: ['p2a'] },
  { name: 'np', type: 'NodePort', clusterIPs: ['10.96.0.41'], ports: [{ port: 80, targetPort: PORT, nodePort: 30041 }], pods: ['p1a'] },
];

type Mode = 'fast path' | 'without';
type Test = 'stream' | 'rr' | 'crr';
interface PathSpec { name: string; from: 'p1b' | 'client'; host: string; port: number }
const PATHS: PathSpec[] = [
  { name: 'ClusterIP, pod on n1 -> endpoint on n2', from: 'p1b', host: '10.96.0.40', port: 80 },
  { name: 'NodePort, outside -> endpoint on n1', from: 'client', host: ADDR.n1.v4, port: 30041 },
];
const UNIT: Record<Test, string> = { stream: 'MB/s', rr: 'transactions/s', crr: 'connections/s' };

/** Busy and total jiffies of the (guest) machine. */
function cpuJiffies(): { busy: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3]! + f[4]!;
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

function generate(_lab: Lab, from: string, a: string[]): Promise<number> {
  return new Promise((resolve, reject) => execFile('ip', ['netns', 'exec', from, BIN, ...a], { timeout: 120000 },
    (e, out) => (e ? reject(e) : resolve(Number(String(out).trim())))));
}

async function inGuest(): Promise<void> {
  const lab = await Lab.create({ servers: false });
  const state = new StateFile();
  state.write(services);
  const servers = ['p1a', 'p2a'].map((p) => lab.spawnIn(lab.ns[p as 'p1a'], BIN, ['serve', String(PORT)]));
  let kpng: Kpng | undefined;
  try {
    await new Promise((r) => setTimeout(r, 500));
    const res = new Map<string, Record<Mode, number[]>>();
    const cpu: Record<Mode, number[]> = { 'fast path': [], without: [] };
    const hz = 100; // USER_HZ
    for (let r = 0; r < RUNS; r++) {
      const modes: Mode[] = r % 2 === 0 ? ['fast path', 'without'] : ['without', 'fast path'];
      for (const mode of modes) {
        kpng = await Kpng.start(lab, state.file, mode === 'fast path' ? { flowtable: 'auto', flowtablePackets: Number(PACKETS) } : {}, 60000);
        for (const p of PATHS) {
          for (const test of ['stream', 'rr', 'crr'] as Test[]) {
            const c0 = cpuJiffies();
            const v = await generate(lab, lab.ns[p.from], [test, p.host, String(p.port), String(SECONDS)]);
            const c1 = cpuJiffies();
            const key = `${p.name}|${test}`;
            if (!res.has(key)) res.set(key, { 'fast path': [], without: [] });
            res.get(key)![mode].push(v);
            if (test === 'stream' && p.from === 'p1b') cpu[mode].push(((c1.busy - c0.busy) / hz) / ((v * 8 * SECONDS) / 1000));
          }
        }
        await kpng.stop();
        kpng = undefined;
      }
    }
    const fmt = (n: number): string => (n >= 1000 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1));
    const range = (l: number[]) => { const s = spread(l); return `${fmt(s.median)} (${fmt(s.min)}-${fmt(s.max)})`; };
    console.log(`nft fast path vs without, qemu guest (kernel ${execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim()}, 1 vCPU under TCG), ${new Date().toISOString().slice(0, 10)}: median (min-max) of ${RUNS} rotated runs of ${SECONDS} s, offload after ${PACKETS} packets`);
    console.log('| path | test | fast path | without | ratio |');
    console.log('|---|---|---|---|---|');
    for (const [key, v] of res) {
      const [p, test] = key.split('|') as [string, Test];
      console.log(`| ${p} | ${test} (${UNIT[test]}) | ${range(v['fast path'])} | ${range(v.without)} | ${(spread(v['fast path']).median / spread(v.without).median).toFixed(2)} |`);
    }
    console.log(`guest CPU-seconds per gigabit, ClusterIP stream: fast path ${spread(cpu['fast path']).median.toFixed(2)}, without ${spread(cpu.without).median.toFixed(2)}`);
  } finally {
    await kpng?.stop();
    for (const s of servers) s.kill('SIGKILL');
    await lab.destroy();
  }
}

function onHost(): void {
  if (process.getuid?.() !== 0) { console.log('fast-path bench: needs root'); return; }
  fs.mkdirSync(path.dirname(BIN), { recursive: true });
  execFileSync('gcc', ['-O2', '-Wall', '-pthread', '-o', BIN, path.join(ROOT, 'bench/ebpf-traffic.c')]);
  const node = path.join(ROOT, 'node_modules/.bin/node');
  const timeout = String(Math.max(600, RUNS * 2 * PATHS.length * 3 * (SECONDS + 3) + 300));
  const r = spawnSync(path.join(ROOT, 'hack/qemu/run.sh'), ['--timeout', timeout, '--mem', '2048', '--modules', 'veth bridge br_netfilter', '--',
    node, __filename, ...args], { stdio: 'inherit', cwd: ROOT });
  process.exitCode = r.status ?? 1;
}

if (process.env.KPNG_IN_GUEST === '1') inGuest().catch((e) => { console.error(e); process.exitCode = 1; });
else onHost();

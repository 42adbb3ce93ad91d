// Traffic through a cluster IP once connected: socket-level LB (the client in the attach cgroup: its
// socket talks to the endpoint itself, no NAT on any packet) vs nft DNAT (the same client outside the
// cgroup: every packet is NATed by conntrack in the node namespace), and the endpoint's own address as
// the floor. Root; figures only, never asserts.
//   rr      one TCP connection, 1-byte request and reply: transactions per second (per-packet cost)
//   stream  one TCP connection, 64 KiB writes: MB/s (large segments: NAT cost spread over many bytes)
//   udp     unconnected sendto() of 64-byte datagrams: datagrams per second the endpoint received (the
//           socket LB's sendmsg program runs on every datagram, DNAT on every packet)
// Topology (bench/ebpf-client-lab.ts, shared with ebpf-connect): client namespace --veth-- node
// namespace (forwards, holds the nft table) --bridge-- pod namespace (bench/ebpf-traffic.c serving on
// 8080). Both dataplanes are programmed in-process with N services (the measured one is service 0). The generator is C (built
// here with gcc): a Node client spends far more per message than the NAT costs. Each cell is the
// median of --runs runs of --seconds each; the three paths take turns in a rotating order.
// Run: npm run build && node dist/bench/ebpf-traffic.bench.js [--sizes 10,50000] [--seconds 3] [--runs 3]
import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Protocol, type Service } from '../src/model/enls';
import { enlsNode, enlsService } from '../test/shared/objects';
import { EbpfClientLab, POD } from './ebpf-client-lab';
import { helpIfAsked } from './help';
import { spread } from './vs-upstream/report';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 && args[i + 1] ? args[i + 1]! : def; };
const SIZES = arg('--sizes', '10,50000').split(',').map(Number);
const SECONDS = Number(arg('--seconds', '3'));
const RUNS = Number(arg('--runs', '3'));
const ROOT = path.resolve(__dirname.includes(`${path.sep}dist${path.sep}`) ? path.join(__dirname, '../..') : path.join(__dirname, '..'));
const lab = new EbpfClientLab('kbf-tr');
const VIP = '10.96.0.1';
const NODE = enlsNode({ v4: [], v6: [] });
let BIN = '';

/** Service i: 10.96.x.y:80, TCP and UDP -> the one pod's 8080. */
const service = (i: number): Service => {
  const svc = enlsService(i, { endpoints: [{ ip: POD, port: 8080, local: true, terminating: false }], masquerade: false }).service!;
  const tcp = svc.ports[0]!;
  return { ...svc, ports: [tcp, { ...tcp, port: { ...tcp.port, name: 'udp', protocol: Protocol.UDP } }] };
};

/** The generator, built into a temporary directory. */
function build(): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-traffic-'));
  BIN = path.join(dir, 'ebpf-traffic');
  execFileSync('gcc', ['-O2', '-Wall', '-pthread', '-o', BIN, path.join(ROOT, 'bench/ebpf-traffic.c')]);
}

async function teardown(): Promise<void> {
  await lab.teardown();
  if (BIN) fs.rmSync(path.dirname(BIN), { recursive: true, force: true });
}

type Path = 'socket LB' | 'nft DNAT' | 'endpoint';
type Test = 'rr' | 'stream' | 'udp';

/** The generator in the client namespace; in the attach cgroup for the socket LB path. */
function generate(args: string[], inCgroup: boolean): Promise<number> {
  return new Promise((resolve, reject) => execFile('sh', ['-c', lab.client(`${BIN} ${args.join(' ')}`, inCgroup)], { timeout: 120000 },
    (e, out) => (e ? reject(e) : resolve(Number(out.trim())))));
}

/** One run of a test on a path: its figure (transactions/s, MB/s, or datagrams received/s). */
async function once(test: Test, p: Path): Promise<number> {
  const host = p === 'endpoint' ? POD : VIP;
  const port = p === 'endpoint' ? '8080' : '80';
  if (test !== 'udp') return generate([test, host, port, String(SECONDS)], p === 'socket LB');
  await generate(['count', POD, '8080'], false); // resets the server's count
  const t0 = performance.now();
  await generate(['udp', host, port, String(SECONDS)], p === 'socket LB');
  const received = await generate(['count', POD, '8080'], false);
  return received / ((performance.now() - t0) / 1000);
}

const UNIT: Record<Test, string> = { rr: 'transactions/s', stream: 'MB/s', udp: 'datagrams/s received' };
const fmt = (n: number): string => (n >= 1000 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1));

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) { console.log('ebpf-traffic bench: needs root'); return; }
  lab.setup();
  build();
  const server = await lab.server(BIN, ['serve', '8080']);
  try {
    const { ebpf, nft } = lab.dataplanes(Math.max(262144, Math.max(...SIZES) * 5));
    console.log(`traffic through a cluster IP once connected, ${os.cpus().length} CPUs, kernel ${os.release()}, ${new Date().toISOString().slice(0, 10)}: median of ${RUNS} runs of ${SECONDS} s per cell`);
    console.log('| services | test | socket LB | nft DNAT | endpoint address | socket LB / DNAT |');
    console.log('|---|---|---|---|---|---|');
    const paths: Path[] = ['socket LB', 'nft DNAT', 'endpoint'];
    for (const n of SIZES) {
      const svcs = Array.from({ length: n }, (_, i) => service(i));
      await ebpf.fullSync(svcs, NODE);
      await nft.fullSync(svcs, NODE);
      for (const test of ['rr', 'stream', 'udp'] as Test[]) {
        const runs: Record<Path, number[]> = { 'socket LB': [], 'nft DNAT': [], endpoint: [] };
        for (let r = 0; r < RUNS; r++) {
          // The order rotates from run to run: no path always runs first or last.
          for (let k = 0; k < paths.length; k++) {
            const p = paths[(k + r) % paths.length]!;
            const before = p === 'socket LB' ? await lab.balanced() : 0;
            runs[p].push(await once(test, p));
            // A socket LB run the programs did not balance measured the DNAT path: say so, not a figure.
            if (p === 'socket LB' && test !== 'udp' && (await lab.balanced()) === before) throw new Error('the socket LB run was not balanced by the programs (no reverse-NAT entry)');
          }
        }
        const m = { lb: spread(runs['socket LB']).median, dnat: spread(runs['nft DNAT']).median, ep: spread(runs.endpoint).median };
        console.log(`| ${n} | ${test} (${UNIT[test]}) | ${fmt(m.lb)} | ${fmt(m.dnat)} | ${fmt(m.ep)} | ${(m.lb / m.dnat).toFixed(2)} |`);
      }
    }
    await ebpf.close();
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    await teardown();
  }
}

main().catch(async (e) => { console.error(e); await teardown(); process.exitCode = 1; });

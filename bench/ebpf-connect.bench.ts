// TCP connect latency to a cluster IP: socket-level LB (the client in the attach cgroup: connect() goes
// straight to the endpoint) vs nft DNAT (the same client outside the cgroup: the node namespace DNATs
// the SYN), with 10 and with 50k services programmed in both. Root; figures only.
// Topology: client namespace --veth-- node namespace --bridge-- pod namespace (TCP server on 8080);
// the node forwards. Both dataplanes are programmed in-process (the maps and the nft table).
// Which client runs first alternates from size to size.
// Run: npm run build && node dist/bench/ebpf-connect.bench.js [--sizes 10,50000] [--connects 2000]
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Service } from '../src/model/enls';
import { enlsNode, enlsService } from '../test/shared/objects';
import { EbpfClientLab, POD } from './ebpf-client-lab';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const SIZES = arg('--sizes', '10,50000').split(',').map(Number);
const CONNECTS = Number(arg('--connects', '2000'));
const ROOT = path.resolve(__dirname.includes(`${path.sep}dist${path.sep}`) ? path.join(__dirname, '../..') : path.join(__dirname, '..'));
const NODE_BIN = path.join(ROOT, 'node_modules/.bin/node');
const CLIENT = path.join(ROOT, 'bench/ebpf-connect-client.js');
const lab = new EbpfClientLab('kbf-cb');
const NODE = enlsNode({ v4: [], v6: [] });
/** Service i: 10.96.x.y:80 -> the one pod (the measured one is service 0; the others are ballast). */
const service = (i: number): Service => enlsService(i, { endpoints: [{ ip: POD, port: 8080, local: true, terminating: false }], masquerade: false }).service!;

function client(inCgroup: boolean): Promise<{ p50: number; p99: number; ok: number; failed: number }> {
  const cmd = lab.client(`${NODE_BIN} ${CLIENT} 10.96.0.1 80 ${CONNECTS}`, inCgroup);
  return new Promise((resolve, reject) => execFile('sh', ['-c', cmd], { timeout: 300000 }, (e, out) => (e ? reject(e) : resolve(JSON.parse(out)))));
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) { console.log('ebpf-connect bench: needs root'); return; }
  lab.setup();
  const server = await lab.server(NODE_BIN, ['-e', "require('net').createServer((s) => s.on('error', () => {}).end()).listen(8080, '0.0.0.0', () => console.log('ready'))"]);
  try {
    const { ebpf, nft } = lab.dataplanes(Math.max(262144, Math.max(...SIZES) * 3));
    console.log(`TCP connect latency to a cluster IP, ${CONNECTS} sequential connects per cell, ${new Date().toISOString().slice(0, 10)}, kernel ${fs.readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}`);
    console.log('| services programmed | socket LB p50 / p99 | nft DNAT p50 / p99 | p50 ratio (LB / DNAT) | sockets balanced by BPF (LB run / DNAT run) |');
    console.log('|---|---|---|---|---|');
    /** One client run, and the sockets the programs balanced meanwhile. */
    const clientRun = async (inCgroup: boolean) => { const r0 = await lab.balanced(); const r = await client(inCgroup); return { ...r, balanced: (await lab.balanced()) - r0 }; };
    for (const [k, n] of SIZES.entries()) {
      const svcs = Array.from({ length: n }, (_, i) => service(i));
      await ebpf.fullSync(svcs, NODE);
      await nft.fullSync(svcs, NODE);
      // Which client goes first alternates from size to size (neither always runs on a colder cache).
      let lb, dnat;
      if (k % 2 === 0) { lb = await clientRun(true); dnat = await clientRun(false); } else { dnat = await clientRun(false); lb = await clientRun(true); }
      if (lb.failed || dnat.failed) console.log(`(failed connects: socket LB ${lb.failed}, DNAT ${dnat.failed})`);
      console.log(`| ${n} | ${lb.p50.toFixed(3)} / ${lb.p99.toFixed(3)} ms | ${dnat.p50.toFixed(3)} / ${dnat.p99.toFixed(3)} ms | ${(lb.p50 / dnat.p50).toFixed(2)} | ${lb.balanced} / ${dnat.balanced} |`);
    }
    await ebpf.close();
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    await lab.teardown();
  }
}

main().catch(async (e) => { console.error(e); await lab.teardown(); process.exitCode = 1; });

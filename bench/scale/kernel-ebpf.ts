// kpng's eBPF socket LB as the kernel holds it: the pinned service and backend maps, dumped through
// bpf(2) by bench/vs-upstream/bpfmaps.py (`dump`; layouts from native/bpf/sock_lb.bpf.c), never
// through kpng's code. The script goes on stdin, so it runs in a node's mount namespace (nsPid) even
// where this checkout's path does not exist.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runIn, placeName, type KernelPlace } from './kernel-place';

export const DEFAULT_PIN_DIR = '/sys/fs/bpf/kpng';

/** One service address of the service map (cluster, external or LB IP, or a node port on a node address). */
export interface SocketLbEntry {
  addr: string;
  port: number;
  /** 'TCP' | 'UDP' | 'SCTP', or the IP protocol number of anything else. */
  proto: string | number;
  /** Slot 0's backend count. */
  count: number;
  /** ClientIP affinity timeout, seconds (0: none). */
  affinity: number;
  /** connect() fails with ECONNREFUSED (no endpoints, REJECT or DROP). */
  refuse: boolean;
  /** `ip:port` (IPv6 bracketed) of slots 1..count, in slot order. */
  backends: string[];
  /** Slots 1..count without an entry, or whose backend id is not in the backend map: connects picking them are refused. */
  missing: number[];
}

/** bpfmaps.py beside bench/vs-upstream in the checkout (this file runs from bench/scale or dist/bench/scale). */
function script(): string {
  for (let d = __dirname; ; d = path.dirname(d)) {
    const p = path.join(d, 'bench', 'vs-upstream', 'bpfmaps.py');
    if (fs.existsSync(p)) return p;
    if (path.dirname(d) === d) throw new Error('bench/vs-upstream/bpfmaps.py not found above ' + __dirname);
  }
}

/** Every entry of the socket LB's service map under `place.pinDir`. */
export async function dumpSocketLb(place: KernelPlace): Promise<SocketLbEntry[]> {
  const pinDir = place.pinDir ?? DEFAULT_PIN_DIR;
  const r = await runIn(place, ['python3', '-', 'dump', pinDir], fs.readFileSync(script(), 'utf8'));
  if (r.code !== 0) throw new Error(`bpfmaps.py dump ${pinDir} in ${placeName(place)}: exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as SocketLbEntry);
}

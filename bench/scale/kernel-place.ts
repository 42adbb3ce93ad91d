// Runs a reading command (nft, python3) where a node's kernel state is visible: inside an ip netns, or
// inside the network and mount namespaces of a process (the local cluster's nodes keep a private
// /sys/fs/bpf), or here. `nsenter --net=` rather than `ip netns exec`: the latter remounts /sys, which
// would hide the host's bpffs pins from a reader that needs them.
import { spawn } from 'node:child_process';

/** Where a node's kernel state is read from. */
export interface KernelPlace {
  /** ip netns name. */
  netns?: string;
  /** Or: enter the net AND mount namespaces of this pid (nsenter -t PID -n -m); wins over netns. */
  nsPid?: number;
  /** kpng eBPF pin dir, default /sys/fs/bpf/kpng. */
  pinDir?: string;
  /** kpng's nftables table (`--nft-table`, `--ebpf-nft-table`), default kpng. */
  nftTable?: string;
}

/** The argv prefix that runs a command in `place`. */
export function enter(place: KernelPlace): string[] {
  if (place.nsPid !== undefined) return ['nsenter', '-t', String(place.nsPid), '-n', '-m', '--'];
  if (place.netns) return ['nsenter', `--net=/var/run/netns/${place.netns}`, '--'];
  return [];
}

/** How `place` is named in errors. */
export const placeName = (place: KernelPlace): string =>
  (place.nsPid !== undefined ? `the namespaces of pid ${place.nsPid}` : place.netns ? `netns ${place.netns}` : 'this namespace');

export interface RunResult { code: number | null; stdout: string; stderr: string }

/**
 * Runs `argv` in `place`, feeding `input` on stdin. Output is kept as Buffers until the end: a large
 * cluster's `nft -j` listing is tens of MB, past execFile's default maxBuffer.
 */
export function runIn(place: KernelPlace, argv: string[], input?: string): Promise<RunResult> {
  const full = [...enter(place), ...argv];
  return new Promise((resolve, reject) => {
    const p = spawn(full[0], full.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout.on('data', (b: Buffer) => out.push(b));
    p.stderr.on('data', (b: Buffer) => err.push(b));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    p.stdin.on('error', () => { /* the command exited without reading its input: its exit code says why */ });
    p.stdin.end(input ?? '');
  });
}

// Typed loader and API of the native netlink addon (native/, built by binding.gyp).
//   nftApply(ops)             one atomic nftables transaction, off the JS thread
//   (the addon's raw nftListTables / nftListChains: read by src/cleanup/nft-listing.ts, the one product
//   path that lists the kernel: it removes what others made. Tests list sets and elements through the
//   test addon, test/helpers/test-native.ts)
//   conntrackDelete(filter)   delete conntrack entries (UDP endpoint / service cleanup)
// Every call takes an optional { netns: '/var/run/netns/NAME' } to work in another network namespace.
import * as os from 'node:os';
import * as path from 'node:path';
import { NftBatch, encodeOps } from './encode';
import {
  NFPROTO, ipAddr,
  type ApplyResult, type ConntrackFilter, type NativeCallOptions, type NftApplyError,
  type NftFailure, type NftOp,
} from './nft-types';

export * from './nft-types';
export * from './nft-expr';
export { NftBatch } from './encode';

interface RawFailure { index: number; element?: number; errno: number; code: string; message?: string }
interface RawApply { messages: number; bytes: number; ms: number; buildMs?: number; queueMs?: number; returnMs?: number; failed: RawFailure[]; overflow: boolean; incomplete: boolean }

export interface NativeAddon {
  nftApply(batch: Buffer, netns?: string): Promise<RawApply>;
  /** Closes the idle nf_tables sockets nftApply keeps for reuse; returns how many. */
  nftCloseSockets(): number;
  /** One table's chains and rules (no sets). */
  nftListChains(family: number, table: string, netns?: string): Promise<RawChainListing>;
  nftListTables(netns?: string): Promise<RawTable[]>;
  conntrackDelete(f: RawCtFilter | RawCtFilter[], netns?: string): Promise<{ deleted: number; scanned: number }>;
  peerCredentials(fd: number): { pid: number; uid: number; gid: number };
  /** glibc mallopt(): the parameters it accepted (none without glibc). See native/malloc.cc. */
  mallocTune(o: { trimThreshold?: number; mmapThreshold?: number; arenaMax?: number }): { applied: string[] };
  /** glibc malloc_trim(0) in a worker: whether memory went back to the kernel. */
  mallocTrim(): Promise<boolean>;
  abi: number;
}

export interface RawTable { family: number; name: string; handle: number; flags: number; comment?: string }
export interface RawChain { family: number; table: string; name: string; handle: number; hooknum?: number; priority?: number; type?: string; device?: string; policy?: number; comment?: string }
export interface RawRule { family: number; table: string; chain: string; handle: number; comment?: string; exprs: { name: string; attrs: Record<number, Uint8Array> }[] }
export interface RawChainListing { table: RawTable; chains: RawChain[]; rules: RawRule[] }

let addon: NativeAddon | undefined;
let loadError: Error | undefined;

const ROOT = path.resolve(__dirname, '..', '..', ...(path.basename(path.resolve(__dirname, '..', '..')) === 'dist' ? ['..'] : []));

/** Loads the addon (prebuilds via node-gyp-build, else build/Release/kpng_native.node). Throws a clear error. */
export function loadNative(): NativeAddon {
  if (addon) return addon;
  if (loadError) throw loadError;
  if (os.endianness() !== 'LE') {
    loadError = new Error('kpng native addon: big-endian hosts are not supported');
    throw loadError;
  }
  const tried: string[] = [];
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const gypBuild = require('node-gyp-build') as (dir: string) => NativeAddon;
    addon = gypBuild(ROOT);
  } catch (e) {
    tried.push(`node-gyp-build(${ROOT}): ${(e as Error).message.split('\n')[0]}`);
    const file = path.join(ROOT, 'build', 'Release', 'kpng_native.node');
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      addon = require(file) as NativeAddon;
    } catch (e2) {
      tried.push(`${file}: ${(e2 as Error).message.split('\n')[0]}`);
    }
  }
  if (!addon) {
    loadError = new Error(
      'kpng native addon is not built (needs libnftnl-dev, libmnl-dev, libbpf-dev, pkg-config; ' +
      'run `make native` or `hack/build-native.sh`). Tried: ' + tried.join('; '));
    throw loadError;
  }
  return addon;
}

/** True when the addon loads on this machine. */
export function nativeAvailable(): boolean {
  try { loadNative(); return true; } catch { return false; }
}

export function nsArg(o?: NativeCallOptions): string | undefined { return o?.netns; }

/**
 * Applies ops as ONE atomic nftables transaction. Resolves with counters; rejects with an
 * NftApplyError (errno, code, failed[]) when the kernel refused anything (then nothing was applied).
 */
export async function nftApply(ops: NftOp[] | NftBatch, opts?: NativeCallOptions): Promise<ApplyResult> {
  const t0 = performance.now();
  const batch = encodeOps(ops);
  const buf = batch.finish();
  const encodeMs = performance.now() - t0;
  if (batch.length === 0) return { messages: 0, bytes: 0, ms: 0, encodeMs };
  const raw = await loadNative().nftApply(buf, nsArg(opts));
  if (raw.failed.length > 0 || raw.incomplete || raw.overflow) {
    const failed: NftFailure[] = raw.failed.map((f) => describeFailure(batch, f));
    const first = failed[0];
    const msg = first
      ? `nftables batch rejected: ${first.op} ${first.object}${first.element !== undefined ? ` element #${first.element}` : ''}: ` +
        `${first.code}${first.message ? ` (${first.message})` : ''}` + (failed.length > 1 ? ` (+${failed.length - 1} more)` : '')
      : raw.overflow ? 'nftables batch: too many kernel errors to receive (socket overflow)'
        : 'nftables batch: the kernel dropped the batch without acknowledging it';
    const err = new Error(msg) as NftApplyError;
    err.errno = first?.errno ?? (raw.overflow ? 105 : 71);
    err.code = first?.code ?? (raw.overflow ? 'ENOBUFS' : 'EPROTO');
    err.failed = failed;
    throw err;
  }
  return { messages: raw.messages, bytes: raw.bytes, ms: raw.ms, encodeMs, buildMs: raw.buildMs, queueMs: raw.queueMs, returnMs: raw.returnMs };
}

/**
 * nftApply keeps its netlink socket per namespace for the next batch (closing one right after a
 * commit waits for an RCU grace period). This closes the idle ones, e.g. before a
 * namespace is deleted (an open socket keeps it alive) or at shutdown.
 */
export function nftCloseSockets(): number {
  return loadNative().nftCloseSockets();
}

function describeFailure(batch: NftBatch, f: RawFailure): NftFailure {
  const d = f.index >= 0 ? batch.descs[f.index] : undefined;
  const out: NftFailure = {
    index: f.index, op: d?.op ?? 'batch', object: d?.object ?? 'the batch as a whole', errno: f.errno, code: f.code,
  };
  if (f.element !== undefined) {
    out.element = f.element;
    const e = d?.elements?.[f.element];
    if (e) out.object += ` element ${Buffer.from(e.key).toString('hex')}`;
    else if (d?.elementText) out.object += ` element ${d.elementText(f.element)}`;
  }
  if (f.message) out.message = f.message;
  return out;
}

const L4: Record<ConntrackFilter['proto'], number> = { tcp: 6, udp: 17, sctp: 132 };

interface RawCtFilter { family: number; proto: number; origDst?: Uint8Array; replySrc?: Uint8Array; dport?: number; replySport?: number; keepReplySrc?: Uint8Array[] }

const rawFilter = (f: ConntrackFilter): RawCtFilter => ({
  family: NFPROTO[f.family], proto: L4[f.proto],
  origDst: f.origDst !== undefined ? ipAddr(f.origDst) : undefined,
  replySrc: f.replySrc !== undefined ? ipAddr(f.replySrc) : undefined,
  dport: f.dport, replySport: f.replySport,
  keepReplySrc: f.keepReplySrc?.map(ipAddr),
});

/**
 * Deletes the conntrack entries that match every field of one of the filters (kube-proxy's UDP
 * cleanup): one kernel dump per family, whatever the number of filters. Returns the count.
 */
export async function conntrackDelete(filters: ConntrackFilter | ConntrackFilter[], opts?: NativeCallOptions): Promise<number> {
  const list = Array.isArray(filters) ? filters : [filters];
  let deleted = 0;
  for (const family of ['ip', 'ip6'] as const) {
    const mine = list.filter((f) => f.family === family);
    if (mine.length) deleted += (await loadNative().conntrackDelete(mine.map(rawFilter), nsArg(opts))).deleted;
  }
  return deleted;
}

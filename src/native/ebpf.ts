// Typed API of the addon's eBPF part (native/ebpf/): load the socket load-balancing object, attach it
// to a cgroup v2 directory with maps and links pinned under bpffs (reused on the next start), batched map
// updates and deletes, map dumps, and clean-up. Keys and values are raw bytes in the layouts of
// native/bpf/sock_lb.bpf.c (encoded by src/backend/ebpf/maps.ts).
import { loadNative } from './index';

export interface EbpfOpenOptions {
  /** cgroup v2 directory the programs attach to (absolute). */
  cgroup: string;
  /**
   * bpffs directory for the pins (absolute; bpffs is mounted at /sys/fs/bpf when it is below and absent).
   * Locked (flock) while the loader is open: a second open of it fails with EBUSY, naming the holder.
   */
  pinDir: string;
  /** The BPF object; default: sock_lb.bpf.o beside the addon. */
  object?: string;
  /** Max entries of the service and backend maps (default: the object's, 262144). Pinned maps of another size are replaced. */
  mapEntries?: number;
  /**
   * The service and backend maps hold all their entries from creation (a hash map without
   * BPF_F_NO_PREALLOC): an update then takes a free element instead of allocating one, about a third of
   * the kernel's time per entry, for kernel memory of the maps' full size (about 100 bytes an entry,
   * used or not). Pinned maps made the other way are replaced.
   */
  prealloc?: boolean;
  /**
   * Balance only sockets of the host network namespace (netns; default kpng's own): connect() and
   * sendmsg() of other namespaces (pods) are left alone and reach services through nft.
   */
  hostNetnsOnly?: boolean;
  /** The host network namespace (a path such as /var/run/netns/NAME), with hostNetnsOnly. */
  netns?: string;
  /** false: load no socket iterator, as on a kernel without bpf_sock_destroy (default: when the kernel has it). */
  socketDestroy?: boolean;
}
export interface EbpfOpenResult {
  handle: number; object: string; reusedMaps: number; reusedLinks: number; programs: string[];
  /**
   * Pinned links left on the previous programs because maps were replaced: the new programs' maps are
   * empty until the first full sync, the old ones still balance with the last state. activate() moves them.
   */
  pendingLinks: number;
  /**
   * One line per pin that could not be taken over as it was and what was done with it: a severed link
   * or one attached to another cgroup (replaced: the new link is attached first, then the old one
   * detached), a map of another layout or size (replaced by an empty one), a pin this object does not
   * have (detached and removed), links that ran programs of another build (updated in place).
   */
  found: string[];
  /** The host network namespace's cookie with hostNetnsOnly (0: sockets of every namespace are balanced). */
  hostNetns: number;
  /** Why sockets connected to removed backends cannot be destroyed ('': they can, destroySockets works). */
  socketDestroyOff: string;
}
/** Sockets destroyed by one destroySockets, per protocol, and the network namespaces searched. */
export interface EbpfDestroyResult { tcp: number; udp: number; namespaces: number; syscalls: number; ms: number }
export interface EbpfMapGroup { map: string; op: 'update' | 'delete'; count: number; keys: Buffer; values?: Buffer }
export interface EbpfApplyResult { syscalls: number; ms: number }
export interface EbpfDump { count: number; keySize: number; valueSize: number; keys: Buffer; values: Buffer; syscalls: number }
/** A rejected ebpfMapApply: which group and element failed, and how many syscalls were made before. */
export interface EbpfApplyError extends Error { errno: number; code: string; group: number; element: number; syscalls: number }

interface EbpfNative {
  ebpfOpen(o: EbpfOpenOptions): Promise<EbpfOpenResult>;
  ebpfMapApply(handle: number, groups: EbpfMapGroup[]): Promise<EbpfApplyResult>;
  ebpfMapDump(handle: number, map: string): Promise<EbpfDump>;
  ebpfDestroySockets(handle: number, keys: Buffer, count: number): Promise<EbpfDestroyResult>;
  ebpfSevered(handle: number): string[];
  ebpfActivate(handle: number): number;
  ebpfClose(handle: number): Promise<void>;
  ebpfCleanup(o: { pinDir: string }): Promise<string[]>;
}
const addon = () => loadNative() as unknown as EbpfNative;

function absolute(name: string, p: unknown): string {
  if (typeof p !== 'string' || !p.startsWith('/') || p.includes('\0')) throw new TypeError(`${name}: an absolute path, got ${JSON.stringify(p)}`);
  return p;
}

/**
 * What the socket-LB dataplane uses of a loaded socket load balancer: its maps, its links and the
 * sockets its programs connected. EbpfLoader in production; FakeEbpfMaps (src/backend/ebpf/fake.ts)
 * in tests. Calls on one instance are serialized by the caller.
 */
export interface EbpfMaps {
  /** What the open found and did (pending links, socket destroy off...). */
  readonly info: EbpfOpenResult;
  /** Batched updates and deletes, one syscall per group, in order; rejects with EbpfApplyError. */
  apply(groups: EbpfMapGroup[]): Promise<EbpfApplyResult>;
  /** Every entry of a map. */
  dump(map: string): Promise<EbpfDump>;
  /** Destroys the sockets connected to removed backends (kpng_gone keys, 40 bytes each). */
  destroySockets(triples: Buffer, count: number): Promise<EbpfDestroyResult>;
  /** Programs whose links the kernel severed. */
  severed(): string[];
  /** Points the pending links at this object's programs; returns how many. */
  activate(): number;
  close(): Promise<void>;
}

/** A loaded, attached socket load balancer. Calls on one instance are serialized by the caller. */
export class EbpfLoader implements EbpfMaps {
  private constructor(readonly info: EbpfOpenResult) {}

  static async open(o: EbpfOpenOptions): Promise<EbpfLoader> {
    const opts: EbpfOpenOptions = { cgroup: absolute('cgroup', o.cgroup), pinDir: absolute('pinDir', o.pinDir) };
    if (o.object !== undefined) opts.object = absolute('object', o.object);
    if (o.mapEntries !== undefined) {
      if (!Number.isInteger(o.mapEntries) || o.mapEntries < 1 || o.mapEntries > 1 << 26) throw new TypeError(`mapEntries: 1 .. ${1 << 26}, got ${o.mapEntries}`);
      opts.mapEntries = o.mapEntries;
    }
    if (o.prealloc) opts.prealloc = true;
    if (o.hostNetnsOnly) {
      opts.hostNetnsOnly = true;
      if (o.netns !== undefined) opts.netns = absolute('netns', o.netns);
    }
    if (o.socketDestroy === false) opts.socketDestroy = false;
    return new EbpfLoader(await addon().ebpfOpen(opts));
  }

  apply(groups: EbpfMapGroup[]): Promise<EbpfApplyResult> {
    for (const g of groups) {
      if (!Number.isInteger(g.count) || g.count < 0) throw new TypeError(`ebpf map group ${g.map}: bad count ${g.count}`);
    }
    const sent = groups.filter((g) => g.count > 0);
    return addon().ebpfMapApply(this.info.handle, sent).catch((e: EbpfApplyError) => {
      // A full hash map refuses a new key with E2BIG, whose text ("Argument list too long") says nothing of it.
      if (e.code === 'E2BIG' && sent[e.group]?.op === 'update') e.message += ` (the map is full: its max entries are --ebpf-map-entries)`;
      throw e;
    });
  }

  dump(map: string): Promise<EbpfDump> {
    return addon().ebpfMapDump(this.info.handle, map);
  }

  /**
   * Destroys the TCP and UDP sockets the programs connected to these removed (backend, service address,
   * protocol) triples (kpng_gone keys, 40 bytes: a kpng_be value, then the service's addr[16], port,
   * protocol, pad), so their applications see an error (ECONNABORTED) and reconnect. Runs the socket
   * iterators in the host's network namespace and, unless hostNetnsOnly, in each one of the processes
   * under the cgroup. Only when info.socketDestroyOff is ''.
   */
  destroySockets(triples: Buffer, count: number): Promise<EbpfDestroyResult> {
    if (!Number.isInteger(count) || count < 0 || triples.length !== count * 40) throw new TypeError(`destroySockets: ${count} triples in ${triples.length} bytes`);
    return addon().ebpfDestroySockets(this.info.handle, triples, count);
  }

  /**
   * The programs whose links the kernel severed because their cgroup was removed: nothing runs them
   * any more, and such a link cannot be updated (a new open replaces it). Synchronous, one syscall per link.
   */
  severed(): string[] {
    return addon().ebpfSevered(this.info.handle);
  }

  /** Points the pending links (info.pendingLinks) at this object's programs; returns how many. Synchronous. */
  activate(): number {
    const n = addon().ebpfActivate(this.info.handle);
    this.info.pendingLinks = 0;
    return n;
  }

  /** Closes kpng's descriptors; the pinned links keep the programs attached. */
  close(): Promise<void> {
    return addon().ebpfClose(this.info.handle);
  }
}

/**
 * Detaches everything pinned under pinDir and removes the pins and the directory. Returns the pins
 * removed. Rejects with EBUSY, naming the holder, while a kpng has the directory open (its lock).
 */
export function ebpfCleanup(pinDir: string): Promise<string[]> {
  return addon().ebpfCleanup({ pinDir: absolute('pinDir', pinDir) });
}

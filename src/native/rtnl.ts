// Typed API of the addon's rtnetlink and sysctl parts (native/rtnl.cc, native/sysctl.cc): a link by
// name (created as a dummy when asked, or deleted), its addresses, batched address adds/deletes, /proc/sys entries.
// Every call takes { netns } like the rest of the addon.
import { loadNative } from './index';
import { addrText } from './addr-text';
import { ipAddr, type NativeCallOptions } from './nft-types';

export interface LinkInfo { ifindex: number; created: boolean; up: boolean }
/** One link of a dump: `flags` are IFF_* (up 0x1, loopback 0x8), `master` the ifindex of its bridge/bond (0: none), `kind` e.g. "veth", "bridge" ("" for physical). */
export interface LinkRow { name: string; ifindex: number; flags: number; master: number; kind: string }

/** deleted: the link was there (and of the asked kind) and is gone now; kind: its kind ("" when absent). */
export interface LinkDeleteResult { deleted: boolean; kind: string }
export interface AddrInfo { ifindex: number; family: 'ip' | 'ip6'; address: string; prefixLength: number; scope: number; flags: number }
export type AddrOp = { op: 'add' | 'del'; ifindex: number; address: string; prefixLength?: number };
export interface AddrFailure { index: number; what: string; errno: number; code: string; message?: string }
export interface AddrApplyResult { messages: number; bytes: number; ms: number; failed: AddrFailure[]; unknown: boolean }
export interface SysctlResult { name: string; before: string; after: string; error?: string }

interface RawResult { messages: number; bytes: number; ms: number; failed: { index: number; errno: number; code: string; message?: string }[]; overflow: boolean; incomplete: boolean }
interface RtnlNative {
  rtnlLink(name: string, opts: { kind?: string; up?: boolean }, netns?: string): Promise<LinkInfo>;
  rtnlLinkDelete(name: string, opts: { kind?: string }, netns?: string): Promise<LinkDeleteResult>;
  rtnlAddrs(ifindex: number, netns?: string): Promise<Buffer>;
  rtnlLinks(netns?: string): Promise<LinkRow[]>;
  rtnlAddrApply(records: Buffer, netns?: string): Promise<RawResult>;
  sysctl(entries: [string, string | null][], netns?: string): Promise<SysctlResult[]>;
}
const addon = () => loadNative() as unknown as RtnlNative;

const REC = 24;
const AF_INET = 2, AF_INET6 = 10;

/** Looks up a link by name; with kind, creates it when absent; with up, sets it up. Rejects (ENODEV) when absent. */
export async function ensureLink(name: string, opts: { kind?: 'dummy'; up?: boolean } = {}, call?: NativeCallOptions): Promise<LinkInfo> {
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(name)) throw new RangeError(`bad interface name ${JSON.stringify(name)}`);
  return addon().rtnlLink(name, opts, call?.netns);
}

/**
 * Deletes a link by name; with kind, only a link of that kind (a link of another kind is left and
 * reported with deleted false). An absent link is no error.
 */
export async function deleteLink(name: string, opts: { kind?: 'dummy' } = {}, call?: NativeCallOptions): Promise<LinkDeleteResult> {
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(name)) throw new RangeError(`bad interface name ${JSON.stringify(name)}`);
  return addon().rtnlLinkDelete(name, opts, call?.netns);
}

/** Every link of the namespace. */
export async function listLinks(call?: NativeCallOptions): Promise<LinkRow[]> {
  return addon().rtnlLinks(call?.netns);
}

/** Addresses of one link (ifindex 0: of every link). */
export async function listAddrs(ifindex = 0, call?: NativeCallOptions): Promise<AddrInfo[]> {
  const b = await addon().rtnlAddrs(ifindex, call?.netns);
  const out: AddrInfo[] = [];
  for (let o = 0; o + REC <= b.length; o += REC) {
    const af = b[o + 4];
    out.push({
      ifindex: b.readUInt32LE(o), family: af === AF_INET6 ? 'ip6' : 'ip', prefixLength: b[o + 5], scope: b[o + 6], flags: b[o + 7],
      address: addrText(b, o + 8, af),
    });
  }
  return out;
}

/** Adds (idempotently: replace) and deletes addresses, in order; failures by op index. */
export async function applyAddrs(ops: AddrOp[], call?: NativeCallOptions): Promise<AddrApplyResult> {
  if (ops.length === 0) return { messages: 0, bytes: 0, ms: 0, failed: [], unknown: false };
  const b = Buffer.alloc(ops.length * REC);
  ops.forEach((op, i) => {
    const a = ipAddr(op.address);
    const o = i * REC;
    b.writeUInt32LE(op.ifindex, o);
    b[o + 4] = a.length === 4 ? AF_INET : AF_INET6;
    b[o + 5] = op.prefixLength ?? a.length * 8;
    b[o + 6] = op.op === 'add' ? 1 : 2;
    b.set(a, o + 8);
  });
  const raw = await addon().rtnlAddrApply(b, call?.netns);
  return {
    messages: raw.messages, bytes: raw.bytes, ms: raw.ms, unknown: raw.overflow || raw.incomplete,
    failed: raw.failed.map((f) => ({
      index: f.index, what: f.index >= 0 && f.index < ops.length ? `${ops[f.index].op} address ${ops[f.index].address}` : 'unknown message',
      errno: f.errno, code: f.code, ...(f.message ? { message: f.message } : {}),
    })),
  };
}

/** Reads /proc/sys entries and writes those with a value (only when different). Names: "net/ipv4/ip_forward". */
export async function sysctl(entries: Array<[string, string | number | null]>, call?: NativeCallOptions): Promise<SysctlResult[]> {
  for (const [n] of entries) if (!/^[a-z0-9_./-]+$/i.test(n) || n.includes('..')) throw new RangeError(`bad sysctl name ${JSON.stringify(n)}`);
  return addon().sysctl(entries.map(([n, v]) => [n, v === null ? null : String(v)]), call?.netns);
}

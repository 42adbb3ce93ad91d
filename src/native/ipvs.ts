// Typed API of the addon's IPVS part (native/ipvs.cc, generic netlink family "IPVS").
//   ipvsApply(ops)     add / change / delete virtual services and their real servers (destinations)
//   ipvsDump()         every virtual service with its destinations and their connection counts
//   ipvsConfig(set?)   TCP / TCP FIN / UDP timeouts;  ipvsInfo(): version (throws when IPVS is absent)
// IPVS has no transactions: each op stands alone, the kernel keeps going after a refused one, and the
// result lists every refused op by its index with a description. Ops and dumps cross N-API as fixed
// 104-byte records (layout in native/ipvs.cc).
import { loadNative } from './index';
import { addrText } from './addr-text';
import { ipAddr, type NativeCallOptions } from './nft-types';

export type IpvsProtocol = 'tcp' | 'udp' | 'sctp';
export type IpvsForward = 'masq' | 'tunnel' | 'route';

/**
 * A virtual service's identity: address (v4 or v6), protocol, port; or a firewall mark (packets whose
 * mark equals it, whatever their destination; then address only gives the family, e.g. 0.0.0.0 or ::,
 * and protocol / port are ignored).
 */
export interface IpvsServiceKey { address: string; protocol: IpvsProtocol; port: number; fwmark?: number }

export interface IpvsService extends IpvsServiceKey {
  /** Scheduler module name without the ip_vs_ prefix: rr, wrr, lc, wlc, sh, mh, ... */
  scheduler: string;
  /** Persistence (ClientIP affinity): seconds a client sticks to its destination; 0 or absent: none. */
  persistenceTimeout?: number;
  /** Other IP_VS_SVC_F_* flags (e.g. sh/mh flags); PERSISTENT is set from persistenceTimeout. */
  flags?: number;
}

export interface IpvsDestKey { address: string; port: number }

export interface IpvsDest extends IpvsDestKey {
  weight: number;
  /** Forwarding method; kpng uses masq (NAT). Default masq. */
  forward?: IpvsForward;
  upperThreshold?: number;
  lowerThreshold?: number;
}

export interface IpvsDestInfo extends Required<IpvsDest> {
  activeConns: number;
  inactiveConns: number;
  persistentConns: number;
}

export interface IpvsServiceInfo extends Required<Omit<IpvsService, 'fwmark'>> {
  fwmark?: number;
  family: 'ip' | 'ip6';
  netmask: number;
  dests: IpvsDestInfo[];
}

export type IpvsOp =
  | { op: 'addService' | 'setService'; service: IpvsService }
  | { op: 'delService'; service: IpvsServiceKey }
  | { op: 'addDest' | 'setDest'; service: IpvsServiceKey; dest: IpvsDest }
  | { op: 'delDest'; service: IpvsServiceKey; dest: IpvsDestKey }
  | { op: 'flush' };

export interface IpvsFailure {
  /** Position of the op in the array given to ipvsApply (-1: not attributable). */
  index: number;
  /** e.g. "addDest tcp 10.96.0.10:80 -> 10.244.1.10:8080". */
  what: string;
  errno: number;
  code: string;
  message?: string;
}

export interface IpvsApplyResult {
  messages: number;
  bytes: number;
  /** Worker-thread time (building + kernel) and TypeScript encoding time. */
  ms: number;
  encodeMs: number;
  /** Ops the kernel refused; everything else was applied. */
  failed: IpvsFailure[];
  /** The kernel's replies were lost (receive buffer overrun) or never came: the outcome is unknown. */
  unknown: boolean;
}

interface RawResult { messages: number; bytes: number; ms: number; failed: { index: number; errno: number; code: string; message?: string }[]; overflow: boolean; incomplete: boolean }
interface IpvsNative {
  ipvsApply(records: Buffer, netns?: string): Promise<RawResult>;
  ipvsDump(dests: boolean | Buffer, netns?: string): Promise<{ records: Buffer; ms: number }>;
  ipvsConfig(set: { tcp?: number; tcpFin?: number; udp?: number } | null, netns?: string): Promise<IpvsTimeouts>;
  ipvsInfo(netns?: string): Promise<{ version: string; connTableSize: number }>;
}

export interface IpvsTimeouts { tcp: number; tcpFin: number; udp: number }

const addon = () => loadNative() as unknown as IpvsNative;

// ---- record layout (native/ipvs.cc) ----
export const IPVS_RECORD = 104;
const R = {
  kind: 0, af: 1, proto: 2, daf: 3, port: 4, dport: 6, addr: 8, daddr: 24, fwmark: 40, flags: 44, timeout: 48,
  netmask: 52, weight: 56, fwd: 60, uthresh: 64, lthresh: 68, active: 72, inactive: 76, persist: 80, sched: 88,
} as const;
const CMD = { addService: 1, setService: 2, delService: 3, addDest: 5, setDest: 6, delDest: 7, flush: 17 } as const;
const AF_INET = 2, AF_INET6 = 10;
const PROTO: Record<IpvsProtocol, number> = { tcp: 6, udp: 17, sctp: 132 };
const PROTO_NAME: Record<number, IpvsProtocol> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };
const FWD: Record<IpvsForward, number> = { masq: 0, tunnel: 2, route: 3 };
const FWD_NAME: Record<number, IpvsForward> = { 0: 'masq', 2: 'tunnel', 3: 'route' };
/** IP_VS_SVC_F_PERSISTENT. */
export const IPVS_SVC_F_PERSISTENT = 0x1;
const IPVS_SVC_F_HASHED = 0x2;

function checkPort(p: number, what: string): void {
  if (!Number.isInteger(p) || p < 0 || p > 65535) throw new RangeError(`${what}: port ${p} out of range`);
}

function putKey(b: Buffer, o: number, s: IpvsServiceKey): void {
  const a = ipAddr(s.address);
  if (s.fwmark !== undefined) {
    if (!Number.isInteger(s.fwmark) || s.fwmark <= 0 || s.fwmark > 0xffffffff) throw new RangeError(`bad firewall mark ${s.fwmark}`);
    b[o + R.af] = a.length === 4 ? AF_INET : AF_INET6;
    b.writeUInt32LE(s.fwmark, o + R.fwmark);
    return;
  }
  const proto = PROTO[s.protocol];
  if (proto === undefined) throw new RangeError(`service ${s.address}:${s.port}: protocol ${String(s.protocol)} is not tcp|udp|sctp`);
  checkPort(s.port, `service ${s.address}`);
  b[o + R.af] = a.length === 4 ? AF_INET : AF_INET6;
  b[o + R.proto] = proto;
  b.writeUInt16LE(s.port, o + R.port);
  b.set(a, o + R.addr);
}

function putService(b: Buffer, o: number, s: IpvsService): void {
  putKey(b, o, s);
  if (!/^[a-z0-9_]{1,15}$/.test(s.scheduler)) throw new RangeError(`service ${s.address}:${s.port}: bad scheduler name ${JSON.stringify(s.scheduler)}`);
  const timeout = s.persistenceTimeout ?? 0;
  if (!Number.isInteger(timeout) || timeout < 0) throw new RangeError(`service ${s.address}:${s.port}: bad persistence timeout ${timeout}`);
  const flags = ((s.flags ?? 0) & ~IPVS_SVC_F_PERSISTENT) | (timeout > 0 ? IPVS_SVC_F_PERSISTENT : 0);
  b.writeUInt32LE(flags >>> 0, o + R.flags);
  b.writeUInt32LE(timeout, o + R.timeout);
  // Persistence granularity: one client address (a /32 mask for v4, a prefix length for v6).
  b.writeUInt32LE(b[o + R.af] === AF_INET ? 0xffffffff : 128, o + R.netmask);
  b.write(s.scheduler, o + R.sched, 16, 'latin1');
}

function putDest(b: Buffer, o: number, d: IpvsDestKey, full?: IpvsDest): void {
  const a = ipAddr(d.address);
  checkPort(d.port, `destination ${d.address}`);
  const af = a.length === 4 ? AF_INET : AF_INET6;
  if (af !== b[o + R.af]) throw new RangeError(`destination ${d.address}: address family differs from its service's`);
  b[o + R.daf] = af;
  b.writeUInt16LE(d.port, o + R.dport);
  b.set(a, o + R.daddr);
  if (full) {
    if (!Number.isInteger(full.weight) || full.weight < 0 || full.weight > 0x7fffffff) throw new RangeError(`destination ${d.address}:${d.port}: bad weight ${full.weight}`);
    b.writeUInt32LE(full.weight, o + R.weight);
    b.writeUInt32LE(FWD[full.forward ?? 'masq'], o + R.fwd);
    b.writeUInt32LE(full.upperThreshold ?? 0, o + R.uthresh);
    b.writeUInt32LE(full.lowerThreshold ?? 0, o + R.lthresh);
  }
}

/** Encodes ops into records (throws RangeError naming the op on bad input; nothing is sent then). */
export function encodeIpvsOps(ops: IpvsOp[]): Buffer {
  const b = Buffer.alloc(ops.length * IPVS_RECORD);
  ops.forEach((op, i) => {
    const o = i * IPVS_RECORD;
    b[o + R.kind] = CMD[op.op];
    try {
      switch (op.op) {
        case 'addService': case 'setService': putService(b, o, op.service); break;
        case 'delService': putKey(b, o, op.service); break;
        case 'addDest': case 'setDest': putKey(b, o, op.service); putDest(b, o, op.dest, op.dest); break;
        case 'delDest': putKey(b, o, op.service); putDest(b, o, op.dest); break;
        case 'flush': break;
        default: throw new RangeError(`unknown op ${(op as { op: string }).op}`);
      }
    } catch (e) {
      throw new RangeError(`ipvs op #${i} (${describeIpvsOp(op)}): ${(e as Error).message}`);
    }
  });
  return b;
}

const hostPort = (a: string, p: number) => (a.includes(':') ? `[${a}]:${p}` : `${a}:${p}`);
const svcText = (s: IpvsServiceKey) => (s.fwmark !== undefined ? `fwmark ${s.fwmark} ${s.address.includes(':') ? 'ip6' : 'ip'}` : `${s.protocol} ${hostPort(s.address, s.port)}`);

export function describeIpvsOp(op: IpvsOp): string {
  if (op.op === 'flush') return 'flush';
  const s = `${op.op} ${svcText(op.service)}`;
  return 'dest' in op ? `${s} -> ${hostPort(op.dest.address, op.dest.port)}` : s;
}

/** Applies ops in order (not atomically). Rejects only when nothing could be sent (no IPVS, no socket, bad input). */
export async function ipvsApply(ops: IpvsOp[], opts?: NativeCallOptions): Promise<IpvsApplyResult> {
  const t0 = performance.now();
  const rec = encodeIpvsOps(ops);
  const encodeMs = performance.now() - t0;
  if (ops.length === 0) return { messages: 0, bytes: 0, ms: 0, encodeMs, failed: [], unknown: false };
  const raw = await addon().ipvsApply(rec, opts?.netns);
  return {
    messages: raw.messages, bytes: raw.bytes, ms: raw.ms, encodeMs, unknown: raw.overflow || raw.incomplete,
    failed: raw.failed.map((f) => ({
      index: f.index, what: f.index >= 0 && f.index < ops.length ? describeIpvsOp(ops[f.index]) : 'unknown message',
      errno: f.errno, code: f.code, ...(f.message ? { message: f.message } : {}),
    })),
  };
}


/** Decodes dump records (a service record followed by its destinations). */
export function decodeIpvsDump(b: Buffer): IpvsServiceInfo[] {
  const out: IpvsServiceInfo[] = [];
  let cur: IpvsServiceInfo | undefined;
  for (let o = 0; o + IPVS_RECORD <= b.length; o += IPVS_RECORD) {
    const af = b[o + R.af];
    if (b[o + R.kind] === 1) {
      const sched = b.toString('latin1', o + R.sched, o + R.sched + 16).replace(/\0.*$/s, '');
      const flags = b.readUInt32LE(o + R.flags);
      const fwmark = b.readUInt32LE(o + R.fwmark);
      cur = {
        family: af === AF_INET6 ? 'ip6' : 'ip', address: addrText(b, o + R.addr, af),
        // Mark services have no protocol (0): 'tcp' stands in, the mark is the identity.
        protocol: PROTO_NAME[b[o + R.proto]] ?? 'tcp', port: b.readUInt16LE(o + R.port),
        ...(fwmark ? { fwmark } : {}),
        scheduler: sched, flags: flags & ~IPVS_SVC_F_HASHED,
        persistenceTimeout: flags & IPVS_SVC_F_PERSISTENT ? b.readUInt32LE(o + R.timeout) : 0,
        netmask: b.readUInt32LE(o + R.netmask), dests: [],
      };
      out.push(cur);
    } else if (cur) {
      const daf = b[o + R.daf] || af;
      cur.dests.push({
        address: addrText(b, o + R.daddr, daf), port: b.readUInt16LE(o + R.dport), weight: b.readInt32LE(o + R.weight),
        forward: FWD_NAME[b.readUInt32LE(o + R.fwd) & 0x7] ?? 'masq',
        upperThreshold: b.readUInt32LE(o + R.uthresh), lowerThreshold: b.readUInt32LE(o + R.lthresh),
        activeConns: b.readUInt32LE(o + R.active), inactiveConns: b.readUInt32LE(o + R.inactive),
        persistentConns: b.readUInt32LE(o + R.persist),
      });
    }
  }
  return out;
}

/** Every virtual service (with destinations unless dests=false). */
export async function ipvsDump(opts?: NativeCallOptions & { dests?: boolean }): Promise<IpvsServiceInfo[]> {
  const r = await addon().ipvsDump(opts?.dests ?? true, opts?.netns);
  return decodeIpvsDump(r.records);
}

/** The destinations (with connection counts) of the given services only; services that are gone are left out. */
export async function ipvsDumpDests(services: IpvsServiceKey[], opts?: NativeCallOptions): Promise<IpvsServiceInfo[]> {
  if (services.length === 0) return [];
  const b = Buffer.alloc(services.length * IPVS_RECORD);
  services.forEach((s, i) => putKey(b, i * IPVS_RECORD, s));
  const r = await addon().ipvsDump(b, opts?.netns);
  return decodeIpvsDump(r.records);
}

/** Sets the given timeouts (seconds; 0 leaves one unchanged), then returns the current ones. */
export async function ipvsConfig(set?: Partial<IpvsTimeouts>, opts?: NativeCallOptions): Promise<IpvsTimeouts> {
  return addon().ipvsConfig(set ?? null, opts?.netns);
}

/** IPVS version; rejects with a clear error when the kernel has no IPVS (module not loaded). */
export async function ipvsInfo(opts?: NativeCallOptions): Promise<{ version: string; connTableSize: number }> {
  return addon().ipvsInfo(opts?.netns);
}

/** A key for maps of services / destinations ("tcp/10.96.0.10/80"). */
export const ipvsServiceId = (s: IpvsServiceKey): string =>
  (s.fwmark !== undefined ? `fwm/${s.address.includes(':') ? 'ip6' : 'ip'}/${s.fwmark}` : `${s.protocol}/${s.address}/${s.port}`);
export const ipvsDestId = (d: IpvsDestKey): string => `${d.address}/${d.port}`;

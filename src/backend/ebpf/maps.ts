// Byte layouts of the socket load balancer's maps (native/bpf/sock_lb.bpf.c: struct svc_key,
// svc_value, backend), encoded and decoded here so the rest of the backend deals in plain objects.
import type { Yielder } from '../../util/yielder';
import { ipv6, writeAddr, writeIPv4 } from '../../native/nft-types';
import { addrText } from '../../native/addr-text';

export const SVC_MAP = 'kpng_svc';
export const BACKEND_MAP = 'kpng_be';
export const SVC_KEY_SIZE = 24;
export const SVC_VALUE_SIZE = 20;
export const BACKEND_VALUE_SIZE = 20;
/** max_entries of kpng_svc and kpng_be unless --ebpf-map-entries says otherwise (sock_lb.bpf.c). */
export const DEFAULT_MAP_ENTRIES = 262144;
/** svc_value.flags: connect() / sendmsg() fail with ECONNREFUSED. */
export const FLAG_REFUSE = 1;

export type Fam = 4 | 6;
export interface SvcKey { addr: string; port: number; proto: number; slot: number }
export interface SvcValue { backendId: number; count: number; affinitySeconds: number; svcId: number; flags: number }
export interface BackendValue { addr: string; port: number }

const famOf = (addr: string): Fam => (addr.includes(':') ? 6 : 4);

export function encodeSvcKey(k: SvcKey): Buffer {
  const b = Buffer.alloc(SVC_KEY_SIZE);
  writeAddr(b, 0, k.addr);
  b.writeUInt16BE(k.port, 16);
  b[18] = k.proto;
  b[19] = famOf(k.addr);
  b.writeUInt16LE(k.slot, 20);
  return b;
}

export function decodeSvcKey(b: Buffer, o = 0): SvcKey {
  const fam = b[o + 19];
  return { addr: addrText(b, o, fam === 6 ? 10 : 2), port: b.readUInt16BE(o + 16), proto: b[o + 18], slot: b.readUInt16LE(o + 20) };
}

/*
 * The dataplane keeps the maps' keys and values as byte strings: one character per byte (latin1), read
 * back by Buffer.from(s, 'latin1'). At 10k services x 10 endpoints it holds ~110k keys: a 24-character
 * string takes 40 bytes of heap, its hex text 64, a Buffer of its own ~400 (an ArrayBuffer and a
 * backing store each). They are made from arrays of byte values by String.fromCharCode, which gives a
 * flat one-byte string (concatenated parts would keep a tree of them alive, 32 bytes a node) without
 * a Buffer's bounds checks and toString: those were half of the planner's time in the interpreter,
 * where kpng runs below 4,000 objects.
 */

/** The slot of a service-map key (a byte string). */
export const slotOfKey = (k: string): number => k.charCodeAt(20) | (k.charCodeAt(21) << 8);

/** slotOfKey(k) === 0: the key of a service address's entry itself (its count, affinity, flags). */
export const isHeadKey = (k: string): boolean => k.charCodeAt(20) === 0 && k.charCodeAt(21) === 0;

/** Whether a service-map key is a TCP service address's (byte 18: IPPROTO_TCP). */
export const isTcpKey = (k: string): boolean => k.charCodeAt(18) === 6;

/** The address, port and protocol of a service-map key (bytes 0-18), as the kpng_gone key holds them. */
export const vipProtoOfKey = (k: string): string => k.slice(0, 19);

/** A little-endian u32 of a byte string. */
const u32At = (s: string, o: number): number =>
  (s.charCodeAt(o) | (s.charCodeAt(o + 1) << 8) | (s.charCodeAt(o + 2) << 16)) + s.charCodeAt(o + 3) * 0x1000000;

/** The byte string of byte values. */
const bytes = (c: number[]): string => String.fromCharCode.apply(null, c);

/** A little-endian u32 into c[o..o+3]. */
function putU32(c: number[], o: number, v: number): void {
  c[o] = v & 255;
  c[o + 1] = (v >>> 8) & 255;
  c[o + 2] = (v >>> 16) & 255;
  c[o + 3] = (v >>> 24) & 255;
}

/** An address in the maps' 16-byte field at c[0..15] (IPv4: 4 bytes, then zeros). */
function putAddr16(c: number[], addr: string): void {
  if (addr.includes(':')) {
    const b = ipv6(addr);
    for (let i = 0; i < 16; i++) c[i] = b[i];
    return;
  }
  writeIPv4(c, 0, addr);
  for (let i = 4; i < 16; i++) c[i] = 0;
}

const valueCodes = new Array<number>(SVC_VALUE_SIZE).fill(0);

/** encodeSvcValue as a byte string. */
export function svcValueBytes(v: SvcValue): string {
  putU32(valueCodes, 0, v.backendId);
  putU32(valueCodes, 4, v.count);
  putU32(valueCodes, 8, v.affinitySeconds);
  putU32(valueCodes, 12, v.svcId);
  putU32(valueCodes, 16, v.flags);
  return bytes(valueCodes);
}

/** The service id (affinity key) of an svc value byte string. */
export const svcIdOfValue = (v: string): number => u32At(v, 12);

/**
 * A service address's keys: write the address, port and protocol once (`at`), then the key of each
 * slot (`slotKey`), as encodeSvcKey(...).toString('latin1') would give.
 */
export class SvcKeyWriter {
  private readonly c = new Array<number>(SVC_KEY_SIZE).fill(0);
  at(addr: string, port: number, proto: number): this {
    putAddr16(this.c, addr);
    this.c[16] = (port >> 8) & 255;
    this.c[17] = port & 255;
    this.c[18] = proto;
    this.c[19] = famOf(addr);
    return this;
  }
  slotKey(slot: number): string {
    this.c[20] = slot & 255;
    this.c[21] = (slot >> 8) & 255;
    return bytes(this.c);
  }
}

/**
 * A backend: `at` writes its address and port; `value()` is encodeBackend(...) as a byte string, and
 * `endpointKey(servicePort, proto)` names it within one service: the value's bytes, then the service
 * port and protocol (the dataplane keeps a backend's id under that key while the endpoint stays).
 */
export class BackendWriter {
  private readonly v = new Array<number>(BACKEND_VALUE_SIZE).fill(0);
  private readonly k = new Array<number>(BACKEND_VALUE_SIZE + 3).fill(0);
  at(addr: string, port: number): this {
    putAddr16(this.v, addr);
    this.v[16] = (port >> 8) & 255;
    this.v[17] = port & 255;
    this.v[18] = famOf(addr);
    this.v[19] = 0;
    for (let i = 0; i < BACKEND_VALUE_SIZE; i++) this.k[i] = this.v[i];
    return this;
  }
  value(): string {
    return bytes(this.v);
  }
  endpointKey(servicePort: number, proto: number): string {
    this.k[BACKEND_VALUE_SIZE] = (servicePort >> 8) & 255;
    this.k[BACKEND_VALUE_SIZE + 1] = servicePort & 255;
    this.k[BACKEND_VALUE_SIZE + 2] = proto;
    return bytes(this.k);
  }
}

/*
 * Map entries are packed into one buffer per batched update; a full sync at 50k packs over a million,
 * so the packers give the event loop its turns.
 */

/** `num(key)` of each key as a little-endian u32 at the start of `width` zeroed bytes, in one buffer. */
export async function packU32<K>(keys: readonly K[], width: number, y: Yielder, num: (k: K) => number): Promise<Buffer> {
  const b = Buffer.alloc(keys.length * width);
  for (let i = 0; i < keys.length; i++) {
    if ((i & 1023) === 0 && y.due()) await y.turn();
    b.writeUInt32LE(num(keys[i]!), i * width);
  }
  return b;
}

/** `text(key)` of each key, byte strings of exactly `width` bytes, in one buffer. */
export async function packLatin1<K>(keys: readonly K[], width: number, y: Yielder, text: (k: K) => string): Promise<Buffer> {
  const b = Buffer.allocUnsafe(keys.length * width);
  // 1024 entries joined, then written at once: one native call per 1024 instead of one each (a
  // first sync at 1k services writes ~20k entries, in the interpreter).
  for (let from = 0; from < keys.length; from += 1024) {
    if (y.due()) await y.turn();
    const to = Math.min(keys.length, from + 1024);
    let chunk = '';
    for (let i = from; i < to; i++) {
      const t = text(keys[i]!);
      if (t.length !== width) throw new Error(`ebpf: a map entry of ${t.length} bytes where ${width} belong`);
      chunk += t;
    }
    if (b.write(chunk, from * width, (to - from) * width, 'latin1') !== (to - from) * width) throw new Error('ebpf: map entries short of their width');
  }
  return b;
}

/** Service-map values of slots >= 1: only the backend id (`idOf(key)`) set. */
export const slotValuesBuffer = <K>(keys: readonly K[], idOf: (k: K) => number, y: Yielder): Promise<Buffer> =>
  packU32(keys, SVC_VALUE_SIZE, y, idOf);

export function encodeSvcValue(v: SvcValue): Buffer {
  const b = Buffer.alloc(SVC_VALUE_SIZE);
  b.writeUInt32LE(v.backendId, 0);
  b.writeUInt32LE(v.count, 4);
  b.writeUInt32LE(v.affinitySeconds, 8);
  b.writeUInt32LE(v.svcId, 12);
  b.writeUInt32LE(v.flags, 16);
  return b;
}

export function decodeSvcValue(b: Buffer, o = 0): SvcValue {
  return { backendId: b.readUInt32LE(o), count: b.readUInt32LE(o + 4), affinitySeconds: b.readUInt32LE(o + 8), svcId: b.readUInt32LE(o + 12), flags: b.readUInt32LE(o + 16) };
}

export function encodeBackend(v: BackendValue): Buffer {
  const b = Buffer.alloc(BACKEND_VALUE_SIZE);
  writeAddr(b, 0, v.addr);
  b.writeUInt16BE(v.port, 16);
  b[18] = famOf(v.addr);
  return b;
}

export function decodeBackend(b: Buffer, o = 0): BackendValue {
  return { addr: addrText(b, o, b[o + 18] === 6 ? 10 : 2), port: b.readUInt16BE(o + 16) };
}

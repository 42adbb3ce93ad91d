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

export type IpVersion = 4 | 6;
export interface SvcKey { addr: string; port: number; proto: number; slot: number }
export interface SvcValue { backendId: number; count: number; affinitySeconds: number; svcId: number; flags: number }
export interface BackendValue { addr: string; port: number }

const famOf = (addr: string): IpVersion => (addr.includes(':') ? 6 : 4);

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
 * A service's plan holds its entries as one byte string (one character per byte, latin1), section
 * after section (plan.ts): a service of 10 endpoints is one string rather than dozens of small
 * objects, and a full sync copies its sections into the batch buffers whole. The bytes are written
 * into scratch buffers (ByteWriter) and read out once.
 */

/** Slot 0 (bytes 20-21): the key of a service address's entry itself (its count, affinity, flags). */
export const isHeadKey = (k: string, o = 0): boolean => k.charCodeAt(o + 20) === 0 && k.charCodeAt(o + 21) === 0;

/** Whether a service-map key (or its first 19 bytes) is a TCP service address's (byte 18: IPPROTO_TCP). */
export const isTcpKey = (k: string, o = 0): boolean => k.charCodeAt(o + 18) === 6;

/** The address, port and protocol of a service-map key (bytes 0-18), as the kpng_gone key holds them. */
export const vipProtoOfKey = (k: string, o = 0): string => k.slice(o, o + 19);

/** A little-endian u32 of a byte string. */
export const u32At = (s: string, o: number): number =>
  (s.charCodeAt(o) | (s.charCodeAt(o + 1) << 8) | (s.charCodeAt(o + 2) << 16)) + s.charCodeAt(o + 3) * 0x1000000;

/** The service id (affinity key) of an svc value byte string (at offset o). */
export const svcIdOfValue = (v: string, o = 0): number => u32At(v, o + 12);

/** Bytes appended to a buffer that grows as needed; read back as a byte string or a Buffer. */
export class ByteWriter {
  private b: Buffer;
  /** Bytes written. */
  n = 0;
  constructor(size = 1024) { this.b = Buffer.alloc(size); }
  reset(): this { this.n = 0; return this; }
  /** Makes room for `k` more bytes. */
  reserve(k: number): void {
    if (this.n + k <= this.b.length) return;
    const b = Buffer.alloc(Math.max(this.n + k, this.b.length * 2));
    this.b.copy(b, 0, 0, this.n);
    this.b = b;
  }
  u8(v: number): void { this.reserve(1); this.b[this.n++] = v; }
  u16be(v: number): void { this.reserve(2); this.b[this.n++] = (v >> 8) & 255; this.b[this.n++] = v & 255; }
  u16le(v: number): void { this.reserve(2); this.b[this.n++] = v & 255; this.b[this.n++] = (v >> 8) & 255; }
  u32le(v: number): void {
    this.reserve(4);
    const b = this.b;
    b[this.n++] = v & 255; b[this.n++] = (v >>> 8) & 255; b[this.n++] = (v >>> 16) & 255; b[this.n++] = (v >>> 24) & 255;
  }
  // Zeros written one by one: Buffer.fill's native call costs more than a few bytes' loop (an
  // address's 12 zeros a million times at 50k services).
  zeros(k: number): void { this.reserve(k); const b = this.b; for (let i = this.n, end = this.n + k; i < end; i++) b[i] = 0; this.n += k; }
  /** An address in the maps' 16-byte field (IPv4: 4 bytes, then zeros). */
  addr16(addr: string): void {
    this.reserve(16);
    if (addr.includes(':')) {
      this.b.set(ipv6(addr), this.n);
      this.n += 16;
    } else {
      writeIPv4(this.b, this.n, addr);
      this.n += 4;
      this.zeros(12);
    }
  }
  /** Overwrites the little-endian u16 at byte `at` (already written). */
  setU16le(at: number, v: number): void { this.b[at] = v & 255; this.b[at + 1] = (v >> 8) & 255; }
  /** `len` bytes of byte string s from `from` (all of s by default). */
  latin1(s: string, from = 0, len = s.length - from): void {
    this.reserve(len);
    if (from === 0 && len === s.length) {
      if (this.b.write(s, this.n, len, 'latin1') !== len) throw new Error('ebpf: a byte string short of its length');
    } else {
      for (let i = 0; i < len; i++) this.b[this.n + i] = s.charCodeAt(from + i);
    }
    this.n += len;
  }
  /** Bytes [from, to) of a writer (this one too), at this one's end. */
  copyOf(w: ByteWriter, from: number, to: number): void {
    this.reserve(to - from);
    const b = this.b, src = w.b;
    for (let i = from; i < to; i++) b[this.n++] = src[i];
  }
  /** Another writer's bytes. */
  append(w: ByteWriter): void {
    // Most of a plan's sections are a few dozen bytes: copied in a loop, a native copy's call costs more.
    if (w.n < 64) { this.copyOf(w, 0, w.n); return; }
    this.reserve(w.n);
    w.b.copy(this.b, this.n, 0, w.n);
    this.n += w.n;
  }
  /** Bytes [from, to) as a byte string. */
  text(from = 0, to = this.n): string { return this.b.toString('latin1', from, to); }
  /** The bytes written (a view: valid until the next write). */
  bytes(): Buffer { return this.b.subarray(0, this.n); }
}

/** A service-map key: address, port, protocol, family, slot (as encodeSvcKey). */
export function writeSvcKey(w: ByteWriter, addr: string, port: number, proto: number, slot: number): void {
  w.addr16(addr);
  w.u16be(port);
  w.u8(proto);
  w.u8(famOf(addr));
  w.u16le(slot);
  w.zeros(2);
}

/** A service-map value (as encodeSvcValue). */
export function writeSvcValue(w: ByteWriter, v: SvcValue): void {
  w.u32le(v.backendId);
  w.u32le(v.count);
  w.u32le(v.affinitySeconds);
  w.u32le(v.svcId);
  w.u32le(v.flags);
}

/** A backend-map value (as encodeBackend). */
export function writeBackend(w: ByteWriter, addr: string, port: number): void {
  w.addr16(addr);
  w.u16be(port);
  w.u8(famOf(addr));
  w.u8(0);
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

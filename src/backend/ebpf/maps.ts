// Byte layouts of the socket load balancer's maps (native/bpf/sock_lb.bpf.c: struct svc_key,
// svc_value, backend), encoded and decoded here so the rest of the backend deals in plain objects.
import { writeAddr } from '../../native/nft-types';
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
 * The dataplane keeps the maps' keys and values as byte strings: one character per byte (latin1),
 * made by Buffer#toString('latin1') and read back by Buffer.from(s, 'latin1'). At 10k services x 10
 * endpoints it holds ~110k keys: a 24-character string takes 40 bytes of heap, its hex text 64, a
 * Buffer of its own ~400 (an ArrayBuffer and a backing store each). Strings made by toString are flat;
 * concatenated parts would keep a tree of them alive (32 bytes a node).
 */

/** The slot of a service-map key (a byte string). */
export const slotOfKey = (k: string): number => k.charCodeAt(20) | (k.charCodeAt(21) << 8);

/** slotOfKey(k) === 0: the key of a service address's entry itself (its count, affinity, flags). */
export const isHeadKey = (k: string): boolean => k.charCodeAt(20) === 0 && k.charCodeAt(21) === 0;

/** Whether a service-map key is a UDP service address's. */
export const isUdpKey = (k: string): boolean => k.charCodeAt(18) === 17;

/** The address and port of a service-map key (bytes 0-17), as the kpng_gone key holds them. */
export const vipOfKey = (k: string): string => k.slice(0, 18);

/** A little-endian u32 of a byte string. */
const u32At = (s: string, o: number): number =>
  (s.charCodeAt(o) | (s.charCodeAt(o + 1) << 8) | (s.charCodeAt(o + 2) << 16)) + s.charCodeAt(o + 3) * 0x1000000;

/** encodeSvcValue as a byte string. */
export const svcValueBytes = (v: SvcValue): string => encodeSvcValue(v).toString('latin1');

/** The service id (affinity key) of an svc value byte string. */
export const svcIdOfValue = (v: string): number => u32At(v, 12);

/** An address in the maps' 16-byte field at b[0..15] (IPv4: 4 bytes, then zeros), over what was there. */
function writeAddr16(b: Buffer, addr: string): void {
  b.fill(0, 0, 16);
  writeAddr(b, 0, addr);
}

/**
 * A service address's keys: write the address, port and protocol once (`at`), then the key of each
 * slot (`slotKey`), as encodeSvcKey(...).toString('latin1') would give.
 */
export class SvcKeyWriter {
  private readonly b = Buffer.alloc(SVC_KEY_SIZE);
  at(addr: string, port: number, proto: number): this {
    writeAddr16(this.b, addr);
    this.b.writeUInt16BE(port, 16);
    this.b[18] = proto;
    this.b[19] = famOf(addr);
    return this;
  }
  slotKey(slot: number): string {
    this.b.writeUInt16LE(slot, 20);
    return this.b.toString('latin1');
  }
}

/**
 * A backend: `at` writes its address and port; `value()` is encodeBackend(...) as a byte string, and
 * `endpointKey(servicePort, proto)` names it within one service: the value's bytes, then the service
 * port and protocol (the dataplane keeps a backend's id under that key while the endpoint stays).
 */
export class BackendWriter {
  private readonly b = Buffer.alloc(BACKEND_VALUE_SIZE + 3);
  at(addr: string, port: number): this {
    writeAddr16(this.b, addr);
    this.b.writeUInt16BE(port, 16);
    this.b[18] = famOf(addr);
    this.b[19] = 0;
    return this;
  }
  value(): string {
    return this.b.toString('latin1', 0, BACKEND_VALUE_SIZE);
  }
  endpointKey(servicePort: number, proto: number): string {
    this.b.writeUInt16BE(servicePort, BACKEND_VALUE_SIZE);
    this.b[BACKEND_VALUE_SIZE + 2] = proto;
    return this.b.toString('latin1');
  }
}

/** Service-map values of slots >= 1 (only the backend id set), one after another in one buffer. */
export function slotValuesBuffer(backendIds: number[]): Buffer {
  const b = Buffer.alloc(backendIds.length * SVC_VALUE_SIZE);
  for (let i = 0; i < backendIds.length; i++) b.writeUInt32LE(backendIds[i], i * SVC_VALUE_SIZE);
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

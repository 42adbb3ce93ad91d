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

/** The slot of an encoded key (hex text, as the dataplane keys its maps). */
export const slotOfHex = (hex: string): number => parseInt(hex.slice(42, 44) + hex.slice(40, 42), 16);

/** slotOfHex(hex) === 0, without making strings (a full sync asks it of every entry). */
export const isHeadHex = (hex: string): boolean =>
  hex.charCodeAt(40) === 48 && hex.charCodeAt(41) === 48 && hex.charCodeAt(42) === 48 && hex.charCodeAt(43) === 48;

/**
 * encodeSvcValue as hex text. The dataplane holds every desired and applied entry (110k at 10k
 * services x 10 endpoints): as 40-character strings they take ~56 bytes each, as 20-byte Buffers
 * ~400 (each Buffer.alloc has its own ArrayBuffer and backing store). Made by Buffer#toString, so the
 * string is flat (concatenating parts would keep a tree of them alive).
 */
export const svcValueHex = (v: SvcValue): string => encodeSvcValue(v).toString('hex');

/** The backend id of an svc value in hex text. */
export const backendIdOfHex = (hex: string): number => parseInt(hex.slice(6, 8) + hex.slice(4, 6) + hex.slice(2, 4) + hex.slice(0, 2), 16);

/**
 * Hex text of map entries written through one scratch buffer: the planner makes ~20 of them per
 * endpoint-slot at a full sync (110k slots at 10k services), and a Buffer each (its own ArrayBuffer)
 * cost more than the encoding.
 */
const scratch = Buffer.alloc(SVC_KEY_SIZE);

/** An address in the maps' 16-byte field at b[0..15] (IPv4: 4 bytes, then zeros), over what was there. */
function writeAddr16(b: Buffer, addr: string): void {
  b.fill(0, 0, 16);
  writeAddr(b, 0, addr);
}

/**
 * A service address's keys: write the address, port and protocol once (`at`), then the hex key of each
 * slot (`slotHex`), as encodeSvcKey(...).toString('hex') would give.
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
  slotHex(slot: number): string {
    this.b.writeUInt16LE(slot, 20);
    return this.b.toString('hex');
  }
}

/** encodeBackend(...).toString('hex'), without a Buffer of its own. */
export function backendHex(addr: string, port: number): string {
  writeAddr16(scratch, addr);
  scratch.writeUInt16BE(port, 16);
  scratch[18] = famOf(addr);
  scratch[19] = 0;
  return scratch.toString('hex', 0, BACKEND_VALUE_SIZE);
}

/** svcValueHex of a slot >= 1 (only the backend id set), without a Buffer of its own. */
export function slotValueHex(backendId: number): string {
  scratch.fill(0, 0, SVC_VALUE_SIZE);
  scratch.writeUInt32LE(backendId, 0);
  return scratch.toString('hex', 0, SVC_VALUE_SIZE);
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

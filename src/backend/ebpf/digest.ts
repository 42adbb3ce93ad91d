// An order-free digest of the socket LB's two maps, so that the tamper audit (audit.ts) can tell
// "the maps hold what was written" from one pass over a dump and a sum of per-service parts, without
// building a JavaScript Map of every entry (a million entries at 50k services would cost hundreds of
// MiB a read). Each entry hashes to two 32-bit lanes (FNV-1a from two offsets, each finished by
// murmur3's avalanche); a map's digest is the sums of its entries' lanes and its entry count, so a
// service's part can be computed once and added. Entries compare as changes.ts compares them: a slot by
// its backend id alone, a slot 0 by its whole value, a backend by its id and value.
import type { EbpfDump } from '../../native/ebpf';
import { BACKEND_VALUE_SIZE, SVC_KEY_SIZE, SVC_VALUE_SIZE } from './maps';
import type { ServicePlan } from './plan';

/** [service-map lane A, lane B, entries; backend-map lane A, lane B, entries]. */
export type MapDigest = [number, number, number, number, number, number];

export const emptyDigest = (): MapDigest => [0, 0, 0, 0, 0, 0];

const PRIME = 16777619;
const BASIS_A = 2166136261;
const BASIS_B = 0x9747b28c;

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Two lanes being hashed; bytes and u32s are fed in, then added to a digest at `at`. */
class Lanes {
  a = BASIS_A;
  b = BASIS_B;
  start(): this { this.a = BASIS_A; this.b = BASIS_B; return this; }
  byte(x: number): void {
    this.a = Math.imul(this.a ^ x, PRIME);
    this.b = Math.imul(this.b ^ x, PRIME);
  }
  u32(x: number): void {
    this.byte(x & 0xff); this.byte((x >>> 8) & 0xff); this.byte((x >>> 16) & 0xff); this.byte((x >>> 24) & 0xff);
  }
  str(s: string, o: number, n: number): void { for (let i = 0; i < n; i++) this.byte(s.charCodeAt(o + i)); }
  buf(b: Buffer, o: number, n: number): void { for (let i = 0; i < n; i++) this.byte(b[o + i]!); }
  addTo(d: MapDigest, at: 0 | 3): void {
    d[at] = (d[at]! + fmix(this.a)) >>> 0;
    d[at + 1] = (d[at + 1]! + fmix(this.b ^ 0x5bd1e995)) >>> 0;
    d[at + 2]!++;
  }
}

const lanes = new Lanes();

/** Adds a service plan's entries (what it writes to both maps) to `d`. */
export function addPlan(d: MapDigest, p: ServicePlan): void {
  for (let j = 0; j < p.heads; j++) {
    const l = lanes.start();
    l.str(p.bytes, j * SVC_KEY_SIZE, SVC_KEY_SIZE);
    l.str(p.bytes, p.headValuesAt + j * SVC_VALUE_SIZE, SVC_VALUE_SIZE);
    l.addTo(d, 0);
  }
  for (let j = 0; j < p.slots; j++) {
    const l = lanes.start();
    l.str(p.bytes, p.slotKeysAt + j * SVC_KEY_SIZE, SVC_KEY_SIZE);
    l.u32(p.slotId(j));
    l.addTo(d, 0);
  }
  for (let i = 0; i < p.backends; i++) {
    const l = lanes.start();
    l.u32(p.backendId(i));
    l.str(p.bytes, p.backendValuesAt + i * BACKEND_VALUE_SIZE, BACKEND_VALUE_SIZE);
    l.addTo(d, 3);
  }
}

/** Adds digest `b` to `a`. */
export function addDigest(a: MapDigest, b: Readonly<MapDigest>): void {
  for (let i = 0; i < 6; i++) a[i] = (a[i]! + b[i]!) >>> 0;
}

export const sameDigest = (a: Readonly<MapDigest>, b: Readonly<MapDigest>): boolean => a.every((x, i) => x === b[i]);

/** The digest of what the maps hold, from their dumps. */
export function digestDumps(svc: EbpfDump, be: EbpfDump): MapDigest {
  const d = emptyDigest();
  for (let i = 0; i < svc.count; i++) {
    const l = lanes.start();
    const ko = i * SVC_KEY_SIZE, vo = i * svc.valueSize;
    l.buf(svc.keys, ko, SVC_KEY_SIZE);
    // A slot 0 (its key's slot bytes zero) by its whole value; a slot by its backend id.
    if (svc.keys[ko + 20] === 0 && svc.keys[ko + 21] === 0) l.buf(svc.values, vo, SVC_VALUE_SIZE);
    else l.u32(svc.values.readUInt32LE(vo));
    l.addTo(d, 0);
  }
  for (let i = 0; i < be.count; i++) {
    const l = lanes.start();
    l.u32(be.keys.readUInt32LE(i * 4));
    l.buf(be.values, i * be.valueSize, BACKEND_VALUE_SIZE);
    l.addTo(d, 3);
  }
  return d;
}

// A set's elements packed as the batch's element items while a full sync renders: on a large cluster
// the render made about a million Elem objects that lived until the batch was encoded, so they were
// promoted to the old generation, and a full GC landing inside the sync paused the event loop long.
// Packed, each Elem dies young; the batch copies the bytes (NftBatch.appendElements).
import { ElementItems } from '../../native/encode';
import { addrText } from '../../native/addr-text';
import { IPPROTO } from '../../native/nft-types';
import { elemText, ElemWriter } from './netlink';
import type { PickDest } from './program';
import { ELEM_CHUNK, type Elem, type IpFamily, type L4, type PackedElemsView, type Verdict } from './types';

export class PackedElems implements PackedElemsView {
  readonly items = new ElementItems();
  /** Elements packed so far. */
  count = 0;
  /** Byte offset of every ELEM_CHUNK-th element: each chunk becomes one element op of the batch. */
  private readonly starts: number[] = [0];

  /** `writer`: shared by a collector's sets (it caches verdict objects). */
  constructor(readonly fam: IpFamily, private readonly writer = new ElemWriter()) {}

  /** Scratch element of addPicks (written, never kept). */
  private readonly pick = { type: 'pick' as const, addr: undefined as string | undefined, proto: 'tcp' as L4, port: 0, slot: 0, epAddr: '', epPort: 0 };

  /** A destination's pick elements, from its endpoints without an object each. */
  addPicks(d: PickDest): void {
    const e = this.pick;
    e.addr = d.addr;
    e.proto = d.proto;
    e.port = d.port;
    for (let i = 0; i < d.eps.length; i++) {
      e.slot = i;
      e.epAddr = d.eps.ip(i);
      e.epPort = d.eps.port(i);
      this.add(e);
    }
  }

  add(e: Elem): void {
    if (this.count > 0 && this.count % ELEM_CHUNK === 0) this.starts.push(this.items.byteLength);
    this.writer.put(this.items, e);
    this.count++;
  }

  /** The element ops' byte ranges, ELEM_CHUNK elements each (as unpacked ops are chunked), with their first element's index. */
  *chunks(): Iterable<{ first: number; from: number; to: number }> {
    for (let c = 0; c < this.starts.length; c++) {
      if (c * ELEM_CHUNK >= this.count) return;
      yield { first: c * ELEM_CHUNK, from: this.starts[c], to: c + 1 < this.starts.length ? this.starts[c + 1] : this.items.byteLength };
    }
  }

  /** The elements as objects again (debug text, tests' fake kernel). */
  decode(): Elem[] {
    const out: Elem[] = [];
    const b = this.items.view();
    for (let at = 0; at < b.length; at += 4 + readU16(b, at + 2)) out.push(decodeItem(this.fam, b, at));
    return out;
  }

  /** Element `i` as an error report names it. */
  text(i: number): string {
    const c = Math.floor(i / ELEM_CHUNK);
    if (i < 0 || i >= this.count || c >= this.starts.length) return `#${i}`;
    const b = this.items.view();
    let at = this.starts[c];
    for (let k = c * ELEM_CHUNK; k < i; k++) at += 4 + readU16(b, at + 2);
    return elemText(decodeItem(this.fam, b, at));
  }
}

const AF_INET = 2, AF_INET6 = 10;
const readU16 = (b: Uint8Array, o: number): number => b[o] | (b[o + 1] << 8);
const be16 = (b: Uint8Array, o: number): number => (b[o] << 8) | b[o + 1];
const le32 = (b: Uint8Array, o: number): number => (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
const PROTO_NAME = new Map<number, L4>([[IPPROTO.tcp, 'tcp'], [IPPROTO.udp, 'udp'], [IPPROTO.sctp, 'sctp']]);
const l4 = (b: Uint8Array, o: number): L4 => {
  const p = PROTO_NAME.get(b[o]);
  if (!p) throw new Error(`packed element: unknown protocol ${b[o]}`);
  return p;
};

/**
 * One element item back to an Elem. Its kind follows from the family and what the item holds (a
 * verdict, map data, or neither) and the key's length: no two kinds share all three.
 */
function decodeItem(fam: IpFamily, b: Buffer, at: number): Elem {
  const end = at + 4 + readU16(b, at + 2);
  let key: Buffer | undefined, data: Buffer | undefined, v: Verdict | undefined;
  // Netlink attributes (host order): NFTA_SET_ELEM_KEY { NFTA_DATA_VALUE }, NFTA_SET_ELEM_DATA
  // { NFTA_DATA_VALUE } or { NFTA_DATA_VERDICT { NFTA_VERDICT_CODE (be32), NFTA_VERDICT_CHAIN } }.
  for (let a = at + 4; a < end; a += (readU16(b, a) + 3) & ~3) {
    const type = readU16(b, a + 2) & 0x7fff;
    const inner = a + 4, innerLen = readU16(b, inner), innerType = readU16(b, inner + 2) & 0x7fff;
    if (type === 1) key = b.subarray(inner + 4, inner + innerLen);
    else if (type === 2 && innerType === 1) data = b.subarray(inner + 4, inner + innerLen);
    else if (type === 2 && innerType === 2) {
      const code = (b[inner + 8] << 24) | (b[inner + 9] << 16) | (b[inner + 10] << 8) | b[inner + 11];
      if (code === 0) v = 'drop';
      else {
        const c = inner + 4 + 8, clen = readU16(b, c);
        v = { goto: b.toString('utf8', c + 4, c + clen - 1) };
      }
    }
  }
  if (!key) throw new Error('packed element without a key');
  const al = fam === 'ip' ? 4 : 16, af = fam === 'ip' ? AF_INET : AF_INET6;
  if (v !== undefined) {
    if (key.length === al + 8) return { type: 'vip', addr: addrText(key, 0, af), proto: l4(key, al), port: be16(key, al + 4), verdict: v };
    return { type: 'port', proto: l4(key, 0), port: be16(key, 4), verdict: v };
  }
  if (data) {
    const epAddr = addrText(data, 0, af), epPort = be16(data, al);
    if (key.length === 12) return { type: 'pick', proto: l4(key, 0), port: be16(key, 4), slot: le32(key, 8), epAddr, epPort };
    return { type: 'pick', addr: addrText(key, 0, af), proto: l4(key, al), port: be16(key, al + 4), slot: le32(key, al + 8), epAddr, epPort };
  }
  if (key.length === 2 * al) return { type: 'pair', addr: addrText(key, 0, af) };
  return { type: 'addr', addr: addrText(key, 0, af) };
}

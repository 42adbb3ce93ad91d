// Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf), read straight into the
// JSON-shaped objects the rest of kpng reads (src/model/parse.ts, the ops observers), for the three
// kinds the kube source watches. kube-proxy itself talks protobuf to the API server: objects are
// under half the bytes of their JSON, and a decoder that knows what it wants skips managedFields,
// owner references, target refs and the rest by their length instead of building them.
//
// Only the fields kpng reads are kept; everything else is skipped. Field numbers are those of
// k8s.io/api (core/v1, discovery/v1) and k8s.io/apimachinery (meta/v1, runtime) generated.proto.
// As the JSON encoding omits empty strings (omitempty), so does the decoder, so that a parsed object
// is the same whichever encoding carried it (test/e2e/kube-protobuf.test.ts compares them).
//
// The envelope: a whole object or list is the magic "k8s\0" and a runtime.Unknown whose field 2 holds
// the message; a watch stream is frames of a 4-byte big-endian length and a meta/v1.WatchEvent, whose
// object (a RawExtension) holds an enveloped object.

import type { Kind } from '../../store/cluster';

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';

/** The encodings a reflector can ask for. */
export type ContentType = 'protobuf' | 'json';

/** kube-proxy's content types (its flag and clientConnection.contentType) as an encoding; undefined for any other. */
export function contentTypeOf(mediaType: string): ContentType | undefined {
  switch (mediaType.trim().toLowerCase()) {
    case PROTOBUF: return 'protobuf';
    case 'application/json': return 'json';
    default: return undefined;
  }
}

/** A response that claims to be protobuf but cannot be read as the message expected. */
export class ProtobufError extends Error {}

type Obj = Record<string, unknown>;

/** What a message decoder is given: the bytes and where its message ends. */
class Reader {
  pos: number;
  constructor(readonly buf: Buffer, pos: number, public end: number) {
    this.pos = pos;
  }

  more(): boolean { return this.pos < this.end; }

  /** An unsigned varint of up to 53 bits (tags, lengths, int64 seconds). */
  uint(): number {
    const buf = this.buf;
    let b = this.byte();
    if (b < 0x80) return b;
    let v = b & 0x7f;
    let mul = 0x80;
    for (let i = 1; i < 10; i++) {
      b = this.byte();
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 0x80;
    }
    throw new ProtobufError(`varint longer than 10 bytes at ${this.pos} of ${buf.length}`);
  }

  /** An int32 field: its low 32 bits, sign included (negative values take 10 bytes on the wire). */
  int32(): number {
    let lo = 0;
    let b: number;
    let shift = 0;
    do {
      b = this.byte();
      if (shift < 32) lo |= (b & 0x7f) << shift;
      shift += 7;
    } while (b >= 0x80 && shift < 70);
    if (b >= 0x80) throw new ProtobufError(`varint longer than 10 bytes at ${this.pos}`);
    return lo | 0;
  }

  bool(): boolean { return this.uint() !== 0; }

  /** The end offset of a length-delimited field whose length comes next. */
  sub(): number {
    const len = this.uint();
    const end = this.pos + len;
    if (end > this.end) throw new ProtobufError(`field of ${len} bytes runs past its message (at ${this.pos}, message ends at ${this.end})`);
    return end;
  }

  string(): string {
    const end = this.sub();
    const s = (this.buf as unknown as { utf8Slice(s: number, e: number): string }).utf8Slice(this.pos, end);
    this.pos = end;
    return s;
  }

  /** Moves past the field whose tag was just read. */
  skip(tag: number): void {
    switch (tag & 7) {
      case 0: this.uint(); return;
      case 1: this.advance(8); return;
      case 2: this.pos = this.sub(); return;
      case 5: this.advance(4); return;
      default: throw new ProtobufError(`wire type ${tag & 7} at ${this.pos} is not one Kubernetes uses`);
    }
  }

  /** Narrows the reader to a sub-message ending at `end` (from sub()); returns the outer end for leave(). */
  enter(end: number): number {
    const outer = this.end;
    this.end = end;
    return outer;
  }

  leave(end: number, outer: number): void {
    if (this.pos !== end) throw new ProtobufError(`sub-message read to ${this.pos}, not its end ${end}`);
    this.end = outer;
  }

  private byte(): number {
    if (this.pos >= this.end) throw new ProtobufError(`message truncated at ${this.pos}`);
    return this.buf[this.pos++];
  }

  private advance(n: number): void {
    if (this.pos + n > this.end) throw new ProtobufError(`message truncated at ${this.pos}`);
    this.pos += n;
  }
}

// Each message decoder reads tags up to the reader's end and switches on the whole tag, (field << 3)
// | wire type, so that a field of an unexpected wire type is skipped like an unknown one. sub()
// narrows the reader to a nested message for its decoder. Plain loops and top-level functions (no
// closure per message): kpng's start runs this code before any optimizing compiler.

/** Decodes the length-delimited message that comes next with `decode` (which reads to r.end). */
function sub<T>(r: Reader, decode: (r: Reader) => T): T {
  const end = r.sub();
  const outer = r.enter(end);
  const v = decode(r);
  r.leave(end, outer);
  return v;
}

/** A string field, left out when empty as the JSON encoding does. */
function setString(o: Obj, key: string, r: Reader): void {
  const s = r.string();
  if (s !== '') o[key] = s;
}

function push<T>(o: Obj, key: string, v: T): void {
  const list = o[key] as T[] | undefined;
  if (list) list.push(v);
  else o[key] = [v];
}

/** A small message of string fields only, by tag (e.g. { 0x0a: 'ip' }): the rarely read ones. */
function stringFields(names: Readonly<Record<number, string>>): (r: Reader) => Obj {
  return (r) => {
    const o: Obj = {};
    while (r.more()) {
      const tag = r.uint();
      const key = names[tag];
      if (key !== undefined) setString(o, key, r);
      else r.skip(tag);
    }
    return o;
  };
}

/** A message read for one repeated message field (`tag`), kept as `key`: [items]. */
function listField(tag: number, key: string, item: (r: Reader) => Obj): (r: Reader) => Obj {
  return (r) => {
    const o: Obj = {};
    while (r.more()) {
      const t = r.uint();
      if (t === tag) push(o, key, sub(r, item));
      else r.skip(t);
    }
    return o;
  };
}

/** A map<string, string> entry (key = 1, value = 2) as [key, value]. */
function mapEntry(r: Reader): [string, string] {
  let key = '';
  let value = '';
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) key = r.string();
    else if (tag === 0x12) value = r.string();
    else r.skip(tag);
  }
  return [key, value];
}

function setEntry(o: Obj, key: 'labels' | 'annotations', r: Reader): void {
  const [k, v] = sub(r, mapEntry);
  // A key that would set the object's prototype instead of a property (never a valid label key).
  if (k !== '__proto__') ((o[key] ??= {}) as Obj)[k] = v;
}

/** meta/v1.Time as the JSON encoding writes it (RFC 3339, seconds). */
function time(r: Reader): string {
  let seconds = 0;
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x08) seconds = r.uint();
    else r.skip(tag);
  }
  return new Date(seconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
}

/** meta/v1.ObjectMeta: the name, namespace, resourceVersion, labels, annotations and deletionTimestamp. */
function objectMeta(r: Reader): Obj {
  const m: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: setString(m, 'name', r); break;
      case 0x1a: setString(m, 'namespace', r); break;
      case 0x32: setString(m, 'resourceVersion', r); break;
      case 0x4a: m.deletionTimestamp = sub(r, time); break;
      case 0x5a: setEntry(m, 'labels', r); break;
      case 0x62: setEntry(m, 'annotations', r); break;
      default: r.skip(tag);
    }
  }
  return m;
}

/** A top-level object of metadata (1), spec (2) and status (3): Service, Node. */
function metaSpecStatus(spec: (r: Reader) => Obj, status: (r: Reader) => Obj): (r: Reader) => Obj {
  return (r) => {
    const o: Obj = {};
    while (r.more()) {
      const tag = r.uint();
      if (tag === 0x0a) o.metadata = sub(r, objectMeta);
      else if (tag === 0x12) o.spec = sub(r, spec);
      else if (tag === 0x1a) o.status = sub(r, status);
      else r.skip(tag);
    }
    return o;
  };
}

/** meta/v1.ListMeta: resourceVersion and continue. */
const listMeta = stringFields({ 0x12: 'resourceVersion', 0x1a: 'continue' });

// --- core/v1.Service ---

function servicePort(r: Reader): Obj {
  const p: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: setString(p, 'name', r); break;
      case 0x12: setString(p, 'protocol', r); break;
      case 0x18: p.port = r.int32(); break;
      case 0x28: p.nodePort = r.int32(); break;
      default: r.skip(tag);
    }
  }
  return p;
}

function clientIPConfig(r: Reader): Obj {
  const c: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x08) c.timeoutSeconds = r.int32();
    else r.skip(tag);
  }
  return c;
}

function sessionAffinityConfig(r: Reader): Obj {
  const c: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) c.clientIP = sub(r, clientIPConfig);
    else r.skip(tag);
  }
  return c;
}

function serviceSpec(r: Reader): Obj {
  const s: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: push(s, 'ports', sub(r, servicePort)); break;
      case 0x1a: setString(s, 'clusterIP', r); break;
      case 0x22: setString(s, 'type', r); break;
      case 0x2a: push(s, 'externalIPs', r.string()); break;
      case 0x3a: setString(s, 'sessionAffinity', r); break;
      case 0x4a: push(s, 'loadBalancerSourceRanges', r.string()); break;
      case 0x5a: setString(s, 'externalTrafficPolicy', r); break;
      case 0x60: s.healthCheckNodePort = r.int32(); break;
      case 0x72: s.sessionAffinityConfig = sub(r, sessionAffinityConfig); break;
      case 0x92: push(s, 'clusterIPs', r.string()); break; // field 18 (on the wire: 0x92 0x01)
      case 0xb2: setString(s, 'internalTrafficPolicy', r); break; // 22
      case 0xba: setString(s, 'trafficDistribution', r); break; // 23
      default: r.skip(tag);
    }
  }
  return s;
}

const loadBalancerIngress = stringFields({ 0x0a: 'ip', 0x12: 'hostname', 0x1a: 'ipMode' });
/** LoadBalancerStatus: { ingress: [...] }. */
const loadBalancerStatus = listField(0x0a, 'ingress', loadBalancerIngress);

function serviceStatus(r: Reader): Obj {
  const s: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) s.loadBalancer = sub(r, loadBalancerStatus);
    else r.skip(tag);
  }
  return s;
}

const service = metaSpecStatus(serviceSpec, serviceStatus);

// --- discovery/v1.EndpointSlice ---

function conditions(r: Reader): Obj {
  const c: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x08) c.ready = r.bool();
    else if (tag === 0x10) c.serving = r.bool();
    else if (tag === 0x18) c.terminating = r.bool();
    else r.skip(tag);
  }
  return c;
}

/** ForZone or ForNode: { name }. */
const named = stringFields({ 0x0a: 'name' });

function hints(r: Reader): Obj {
  const h: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) push(h, 'forZones', sub(r, named));
    else if (tag === 0x12) push(h, 'forNodes', sub(r, named));
    else r.skip(tag);
  }
  return h;
}

function endpoint(r: Reader): Obj {
  const e: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: push(e, 'addresses', r.string()); break;
      case 0x12: e.conditions = sub(r, conditions); break;
      case 0x32: setString(e, 'nodeName', r); break;
      case 0x3a: setString(e, 'zone', r); break;
      case 0x42: e.hints = sub(r, hints); break;
      default: r.skip(tag);
    }
  }
  return e;
}

function endpointPort(r: Reader): Obj {
  const p: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) setString(p, 'name', r);
    else if (tag === 0x12) setString(p, 'protocol', r);
    else if (tag === 0x18) p.port = r.int32();
    else r.skip(tag);
  }
  return p;
}

function endpointSlice(r: Reader): Obj {
  const o: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: o.metadata = sub(r, objectMeta); break;
      case 0x12: push(o, 'endpoints', sub(r, endpoint)); break;
      case 0x1a: push(o, 'ports', sub(r, endpointPort)); break;
      case 0x22: setString(o, 'addressType', r); break;
      default: r.skip(tag);
    }
  }
  return o;
}

// --- core/v1.Node ---

const taint = stringFields({ 0x0a: 'key', 0x12: 'value', 0x1a: 'effect' });
/** NodeSpec: { taints: [...] } (field 5). */
const nodeSpec = listField(0x2a, 'taints', taint);
const nodeAddress = stringFields({ 0x0a: 'type', 0x12: 'address' });
/** NodeStatus: { addresses: [...] } (field 5). */
const nodeStatus = listField(0x2a, 'addresses', nodeAddress);

const node = metaSpecStatus(nodeSpec, nodeStatus);

// --- meta/v1.Status (errors) ---

function status(r: Reader): Obj {
  const s: Obj = { kind: 'Status' };
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x12) setString(s, 'status', r);
    else if (tag === 0x1a) setString(s, 'message', r);
    else if (tag === 0x22) setString(s, 'reason', r);
    else if (tag === 0x30) s.code = r.int32();
    else r.skip(tag);
  }
  return s;
}

// --- envelopes ---

/** The kinds a reflector reads. */
export type ProtoKind = Kind;
const decoders: Record<ProtoKind, (r: Reader) => Obj> = { Service: service, EndpointSlice: endpointSlice, Node: node };

const MAGIC = [0x6b, 0x38, 0x73, 0x00]; // "k8s\0"

/** runtime.TypeMeta's kind (field 2). */
function typeMetaKind(r: Reader): string {
  let kind = '';
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x12) kind = r.string();
    else r.skip(tag);
  }
  return kind;
}

/** An enveloped object (magic + runtime.Unknown) in buf[start, end): its kind and a reader of its message. */
function enveloped(buf: Buffer, start: number, end: number, what: string): { typeKind: string; r: Reader } {
  for (let i = 0; i < 4; i++) {
    if (buf[start + i] !== MAGIC[i]) throw new ProtobufError(`no "k8s\\0" prefix: not a Kubernetes protobuf object (${what})`);
  }
  const r = new Reader(buf, start + 4, end);
  let typeKind = '';
  let rawStart = -1;
  let rawEnd = -1;
  let contentEncoding = '';
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) typeKind = sub(r, typeMetaKind);
    else if (tag === 0x12) {
      rawEnd = r.sub();
      rawStart = r.pos;
      r.pos = rawEnd;
    } else if (tag === 0x1a) contentEncoding = r.string();
    else r.skip(tag);
  }
  if (contentEncoding) throw new ProtobufError(`content encoding ${JSON.stringify(contentEncoding)} is not supported`);
  if (rawStart < 0) throw new ProtobufError(`${typeKind || what} without its message`);
  return { typeKind, r: new Reader(buf, rawStart, rawEnd) };
}

/** One enveloped object: `kind` as a JSON-shaped object, or a Status (kind: 'Status'). */
export function decodeObject(kind: ProtoKind, buf: Buffer, start = 0, end = buf.length): Obj {
  const { typeKind, r } = enveloped(buf, start, end, kind);
  return typeKind === 'Status' ? status(r) : decoders[kind](r);
}

/** A list response (ServiceList, EndpointSliceList, NodeList): { metadata, items }, or a Status. */
export function decodeList(kind: ProtoKind, buf: Buffer): Obj {
  const { typeKind, r } = enveloped(buf, 0, buf.length, `${kind}List`);
  if (typeKind === 'Status') return status(r);
  const decode = decoders[kind];
  const items: Obj[] = [];
  const list: Obj = { items };
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) list.metadata = sub(r, listMeta);
    else if (tag === 0x12) items.push(sub(r, decode));
    else r.skip(tag);
  }
  return list;
}

/** An error response's Status (HTTP 4xx/5xx with a protobuf body). */
export function decodeStatus(buf: Buffer): Obj {
  return status(enveloped(buf, 0, buf.length, 'Status').r);
}

export interface ProtoWatchEvent {
  type?: string;
  object?: Obj;
}

/** One watch frame (meta/v1.WatchEvent: type = 1, object = 2, a RawExtension whose raw = 1). */
export function decodeWatchEvent(kind: ProtoKind, buf: Buffer, start: number, end: number): ProtoWatchEvent {
  const r = new Reader(buf, start, end);
  const ev: ProtoWatchEvent = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) ev.type = r.string();
    else if (tag === 0x12) {
      const xend = r.sub();
      const outer = r.enter(xend);
      while (r.more()) {
        const t = r.uint();
        if (t !== 0x0a) { r.skip(t); continue; }
        const oend = r.sub();
        ev.object = decodeObject(kind, buf, r.pos, oend);
        r.pos = oend;
      }
      r.leave(xend, outer);
    } else r.skip(tag);
  }
  return ev;
}

/** Splits a protobuf watch stream into frames: a 4-byte big-endian length, then that many bytes. */
export class FrameSplitter {
  /** Chunks of an incomplete frame, and their bytes. */
  private parts: Buffer[] = [];
  private have = 0;

  constructor(private readonly maxFrame = 64 << 20) {}

  /** Calls `frame(buf, start, end)` for every complete frame in `chunk` (plus what was pending). */
  push(chunk: Buffer, frame: (buf: Buffer, start: number, end: number) => void): void {
    let buf = chunk;
    if (this.have > 0) {
      // Join only once the pending frame is complete (a large frame spans many chunks).
      this.parts.push(chunk);
      this.have += chunk.length;
      if (this.have < 4) return;
      if (this.parts[0].length < 4) this.parts = [Buffer.concat(this.parts, this.have)];
      const need = 4 + this.checked(this.parts[0].readUInt32BE(0));
      if (this.have < need) return;
      buf = Buffer.concat(this.parts, this.have);
      this.parts = [];
      this.have = 0;
    }
    let p = 0;
    while (buf.length - p >= 4) {
      const len = this.checked(buf.readUInt32BE(p));
      if (buf.length - p - 4 < len) break;
      frame(buf, p + 4, p + 4 + len);
      p += 4 + len;
    }
    if (p < buf.length) {
      // A copy, so that the pending tail does not keep a whole chunk alive.
      const tail = Buffer.from(buf.subarray(p));
      this.parts = [tail];
      this.have = tail.length;
    }
  }

  /** Bytes of an incomplete frame left at the end of the stream. */
  get leftover(): number { return this.have; }

  private checked(len: number): number {
    if (len > this.maxFrame) throw new ProtobufError(`watch frame of ${len} bytes (more than ${this.maxFrame})`);
    return len;
  }
}

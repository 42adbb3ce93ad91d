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

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';

/** The encodings a reflector can ask for. */
export type ContentType = 'protobuf' | 'json';

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

// Each message decoder reads tags until its end and switches on the whole tag, (field << 3) | wire
// type, so that a field of an unexpected wire type is skipped like an unknown one. Written as plain
// loops (no callback per message): the start of kpng runs this code before any optimizing compiler.

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

/** A map<string, string> entry (key = 1, value = 2) into `into`. */
function mapEntry(r: Reader, into: Obj): void {
  const end = r.sub();
  const outer = r.enter(end);
  let key = '';
  let value = '';
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) key = r.string();
    else if (tag === 0x12) value = r.string();
    else r.skip(tag);
  }
  r.leave(end, outer);
  // A key that would set the object's prototype instead of a property (never a valid label key).
  if (key !== '__proto__') into[key] = value;
}

/** meta/v1.Time as the JSON encoding writes it (RFC 3339, seconds). */
function time(r: Reader): string {
  const end = r.sub();
  const outer = r.enter(end);
  let seconds = 0;
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x08) seconds = r.uint();
    else r.skip(tag);
  }
  r.leave(end, outer);
  return new Date(seconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
}

/** meta/v1.ObjectMeta: the name, namespace, resourceVersion, labels, annotations and deletionTimestamp. */
function objectMeta(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const m: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: setString(m, 'name', r); break;
      case 0x1a: setString(m, 'namespace', r); break;
      case 0x32: setString(m, 'resourceVersion', r); break;
      case 0x4a: m.deletionTimestamp = time(r); break;
      case 0x5a: mapEntry(r, (m.labels ??= {}) as Obj); break;
      case 0x62: mapEntry(r, (m.annotations ??= {}) as Obj); break;
      default: r.skip(tag);
    }
  }
  r.leave(end, outer);
  return m;
}

/** meta/v1.ListMeta: resourceVersion and continue. */
function listMeta(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const m: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x12) setString(m, 'resourceVersion', r);
    else if (tag === 0x1a) setString(m, 'continue', r);
    else r.skip(tag);
  }
  r.leave(end, outer);
  return m;
}

// --- core/v1.Service ---

function servicePort(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
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
  r.leave(end, outer);
  return p;
}

/** SessionAffinityConfig: { clientIP: { timeoutSeconds } }. */
function sessionAffinityConfig(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const c: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag !== 0x0a) { r.skip(tag); continue; }
    const cend = r.sub();
    const couter = r.enter(cend);
    const ip: Obj = {};
    while (r.more()) {
      const t = r.uint();
      if (t === 0x08) ip.timeoutSeconds = r.int32();
      else r.skip(t);
    }
    r.leave(cend, couter);
    c.clientIP = ip;
  }
  r.leave(end, outer);
  return c;
}

function serviceSpec(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const s: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: push(s, 'ports', servicePort(r)); break;
      case 0x1a: setString(s, 'clusterIP', r); break;
      case 0x22: setString(s, 'type', r); break;
      case 0x2a: push(s, 'externalIPs', r.string()); break;
      case 0x3a: setString(s, 'sessionAffinity', r); break;
      case 0x4a: push(s, 'loadBalancerSourceRanges', r.string()); break;
      case 0x5a: setString(s, 'externalTrafficPolicy', r); break;
      case 0x60: s.healthCheckNodePort = r.int32(); break;
      case 0x72: s.sessionAffinityConfig = sessionAffinityConfig(r); break;
      case 0x92: push(s, 'clusterIPs', r.string()); break; // field 18: two-byte tag 0x92 0x01
      case 0xb2: setString(s, 'internalTrafficPolicy', r); break; // 22
      case 0xba: setString(s, 'trafficDistribution', r); break; // 23
      default: r.skip(tag);
    }
  }
  r.leave(end, outer);
  return s;
}

function loadBalancerIngress(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const g: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) setString(g, 'ip', r);
    else if (tag === 0x12) setString(g, 'hostname', r);
    else if (tag === 0x1a) setString(g, 'ipMode', r);
    else r.skip(tag);
  }
  r.leave(end, outer);
  return g;
}

/** ServiceStatus: { loadBalancer: { ingress: [...] } }. */
function serviceStatus(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const s: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag !== 0x0a) { r.skip(tag); continue; }
    const lend = r.sub();
    const louter = r.enter(lend);
    const lb: Obj = {};
    while (r.more()) {
      const t = r.uint();
      if (t === 0x0a) push(lb, 'ingress', loadBalancerIngress(r));
      else r.skip(t);
    }
    r.leave(lend, louter);
    s.loadBalancer = lb;
  }
  r.leave(end, outer);
  return s;
}

function service(r: Reader): Obj {
  const o: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) o.metadata = objectMeta(r);
    else if (tag === 0x12) o.spec = serviceSpec(r);
    else if (tag === 0x1a) o.status = serviceStatus(r);
    else r.skip(tag);
  }
  return o;
}

// --- discovery/v1.EndpointSlice ---

function conditions(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const c: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x08) c.ready = r.bool();
    else if (tag === 0x10) c.serving = r.bool();
    else if (tag === 0x18) c.terminating = r.bool();
    else r.skip(tag);
  }
  r.leave(end, outer);
  return c;
}

/** ForZone or ForNode: { name }. */
function named(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const n: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) setString(n, 'name', r);
    else r.skip(tag);
  }
  r.leave(end, outer);
  return n;
}

function hints(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const h: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) push(h, 'forZones', named(r));
    else if (tag === 0x12) push(h, 'forNodes', named(r));
    else r.skip(tag);
  }
  r.leave(end, outer);
  return h;
}

function endpoint(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const e: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: push(e, 'addresses', r.string()); break;
      case 0x12: e.conditions = conditions(r); break;
      case 0x32: setString(e, 'nodeName', r); break;
      case 0x3a: setString(e, 'zone', r); break;
      case 0x42: e.hints = hints(r); break;
      default: r.skip(tag);
    }
  }
  r.leave(end, outer);
  return e;
}

function endpointPort(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const p: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) setString(p, 'name', r);
    else if (tag === 0x12) setString(p, 'protocol', r);
    else if (tag === 0x18) p.port = r.int32();
    else r.skip(tag);
  }
  r.leave(end, outer);
  return p;
}

function endpointSlice(r: Reader): Obj {
  const o: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    switch (tag) {
      case 0x0a: o.metadata = objectMeta(r); break;
      case 0x12: push(o, 'endpoints', endpoint(r)); break;
      case 0x1a: push(o, 'ports', endpointPort(r)); break;
      case 0x22: setString(o, 'addressType', r); break;
      default: r.skip(tag);
    }
  }
  return o;
}

// --- core/v1.Node ---

function taint(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const t: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) setString(t, 'key', r);
    else if (tag === 0x12) setString(t, 'value', r);
    else if (tag === 0x1a) setString(t, 'effect', r);
    else r.skip(tag);
  }
  r.leave(end, outer);
  return t;
}

function nodeAddress(r: Reader): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const a: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) setString(a, 'type', r);
    else if (tag === 0x12) setString(a, 'address', r);
    else r.skip(tag);
  }
  r.leave(end, outer);
  return a;
}

/** NodeSpec's taints (field 5) or NodeStatus's addresses (field 5). */
function listField5(r: Reader, key: string, item: (r: Reader) => Obj): Obj {
  const end = r.sub();
  const outer = r.enter(end);
  const o: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x2a) push(o, key, item(r));
    else r.skip(tag);
  }
  r.leave(end, outer);
  return o;
}

function node(r: Reader): Obj {
  const o: Obj = {};
  while (r.more()) {
    const tag = r.uint();
    if (tag === 0x0a) o.metadata = objectMeta(r);
    else if (tag === 0x12) o.spec = listField5(r, 'taints', taint);
    else if (tag === 0x1a) o.status = listField5(r, 'addresses', nodeAddress);
    else r.skip(tag);
  }
  return o;
}

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

/** The kinds a reflector reads, by the kind its requests name. */
export type ProtoKind = 'Service' | 'EndpointSlice' | 'Node';
const decoders: Record<ProtoKind, (r: Reader) => Obj> = { Service: service, EndpointSlice: endpointSlice, Node: node };

const MAGIC = [0x6b, 0x38, 0x73, 0x00]; // "k8s\0"

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
    if (tag === 0x0a) { // TypeMeta: kind = 2
      const tend = r.sub();
      const outer = r.enter(tend);
      while (r.more()) {
        const t = r.uint();
        if (t === 0x12) typeKind = r.string();
        else r.skip(t);
      }
      r.leave(tend, outer);
    } else if (tag === 0x12) {
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
    if (tag === 0x0a) list.metadata = listMeta(r);
    else if (tag === 0x12) {
      const iend = r.sub();
      const outer = r.enter(iend);
      items.push(decode(r));
      r.leave(iend, outer);
    } else r.skip(tag);
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

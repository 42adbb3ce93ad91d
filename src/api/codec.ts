// The Watch messages (proto/watch.proto) on the wire: protobufjs static code does the
// encoding; this file adds what gRPC needs (serializers that never throw on the server side)
// and a per-item cache so that an item shared by many clients is encoded once.
import { kpng } from '../gen/proto';
import { normalizeItem, type Item } from '../model/enls';

const w = kpng.watchv1;

export const WATCH_METHOD = '/kpng.watchv1.Watch/Watch';

export interface WatchRequest {
  node: string;
  reset: boolean;
  appliedRevision: number;
}

/** A request the server could not decode (garbage, wrong wire types). */
export interface BadRequest { bad: string }

export const isBadRequest = (r: WatchRequest | BadRequest): r is BadRequest => 'bad' in r;

export function encodeRequest(r: Partial<WatchRequest>): Buffer {
  return Buffer.from(w.WatchRequest.encode({ node: r.node ?? '', reset: !!r.reset, appliedRevision: r.appliedRevision ?? 0 }).finish());
}

/** Server side: never throws (a malformed request becomes a BadRequest answered with INVALID_ARGUMENT). */
export function decodeRequest(buf: Buffer): WatchRequest | BadRequest {
  try {
    const m = w.WatchRequest.decode(buf);
    if (typeof m.node !== 'string') return { bad: 'node is not a string' };
    const rev = Number(m.appliedRevision ?? 0);
    return { node: m.node, reset: !!m.reset, appliedRevision: Number.isFinite(rev) ? rev : 0 };
  } catch (e) {
    return { bad: (e as Error).message };
  }
}

/** An op as the client sees it. */
export type WireOp =
  | { op: 'reset' }
  | { op: 'set'; item: Item }
  | { op: 'delete'; key: string }
  | { op: 'sync'; revision: number; items: number };

/** One op ready for an OpBatch: its field prefix and bytes, and the op's own length. */
interface FramedOp { framed: Buffer; opLength: number }

/**
 * Framed `Op{set: item}` per item object (items are immutable once stored; a new value is a new
 * object). Node states share item objects, so an item alike on many nodes is encoded once.
 */
const setOpCache = new WeakMap<Item, FramedOp>();

/** The bytes before one op inside an OpBatch: field 1 (ops), length-delimited, then the length. */
function opPrefix(length: number): Buffer {
  const b = Buffer.allocUnsafe(6);
  b[0] = 10;
  let n = 1;
  let v = length;
  while (v > 127) { b[n++] = (v & 127) | 128; v >>>= 7; }
  b[n++] = v;
  return b.subarray(0, n);
}

function frame(op: Uint8Array): FramedOp {
  const prefix = opPrefix(op.length);
  return { framed: Buffer.concat([prefix, op]), opLength: op.length };
}

function setOp(item: Item): FramedOp {
  let f = setOpCache.get(item);
  if (!f) setOpCache.set(item, (f = frame(w.Op.encode({ set: item }).finish())));
  return f;
}

const RESET_OP = frame(w.Op.encode({ reset: {} }).finish());

/**
 * A run of RUN consecutive set ops of a full state, framed into one buffer. Node states share item
 * objects and every node has the same keys, so the same run of objects recurs at the same place in
 * the full state of every node that has nothing of its own there: it is copied as one block
 * instead of RUN cached ops (a thousand nodes x 10k services is 10M ops). Built the second time a
 * run is met (a run only one node has is not worth keeping); keyed by its first item.
 */
interface Run { items: Item[]; framed: Buffer; ends: Int32Array; sizes: Int32Array; size: number }
const RUN = 64;
const runs = new WeakMap<Item, Run>();
const runSeen = new WeakMap<Item, Item[]>();

function runAt(ops: readonly (Item | string)[], i: number): Run | undefined {
  if (i % RUN !== 0 || i + RUN > ops.length) return undefined;
  const first = ops[i];
  if (typeof first === 'string') return undefined;
  const same = (items: Item[]) => { for (let j = 1; j < RUN; j++) if (ops[i + j] !== items[j]) return false; return true; };
  const run = runs.get(first);
  if (run && same(run.items)) return run;
  const seen = runSeen.get(first);
  const items = ops.slice(i, i + RUN) as Item[];
  if (!seen || !same(seen) || items.some((o) => typeof o === 'string')) {
    runSeen.set(first, items);
    return undefined;
  }
  runSeen.delete(first);
  const parts = items.map(setOp);
  const ends = new Int32Array(RUN), sizes = new Int32Array(RUN);
  let end = 0, size = 0;
  parts.forEach((p, j) => { end += p.framed.length; ends[j] = end; sizes[j] = p.opLength + 6; size += sizes[j]; });
  const built: Run = { items, framed: Buffer.concat(parts.map((p) => p.framed), end), ends, sizes, size };
  runs.set(first, built);
  return built;
}

/**
 * A whole message made of runs only, kept as one buffer: the same message recurs in the full
 * state of every node that has nothing of its own there, and is then handed to gRPC as it is
 * (no copy of ours; at 1,000 nodes x 10k services that is 1.7 GB not copied). Built the second
 * time it is met, like a run; keyed by its first run.
 */
interface Page { runs: Run[]; message: Buffer }
const pages = new WeakMap<Run, Page>();
const pageSeen = new WeakMap<Run, Run[]>();

function pageMessage(pageRuns: Run[], parts: Buffer[], length: number): Buffer {
  const first = pageRuns[0]!;
  const same = (rs: Run[]) => rs.length === pageRuns.length && rs.every((r, k) => r === pageRuns[k]);
  const page = pages.get(first);
  if (page && same(page.runs)) return page.message;
  const message = Buffer.concat(parts, length);
  const seen = pageSeen.get(first);
  if (seen && same(seen)) {
    pageSeen.delete(first);
    pages.set(first, { runs: pageRuns, message });
  } else {
    pageSeen.set(first, pageRuns);
  }
  return message;
}

/**
 * Encodes a batch as OpBatch messages of about `chunkBytes` each: Reset first when the batch
 * is a reset, then the ops (an Item is a set, a string the key of a delete), then Sync. Returns
 * the messages lazily so a slow client's stream encodes only as fast as it drains. A full state's
 * messages are cut before a run of shared ops rather than inside it, so that most of them are made
 * of whole runs and are the same buffers on every node (see Page).
 */
export function* encodeBatch(batch: { reset: boolean; ops: readonly (Item | string)[]; revision: number }, items: number, chunkBytes = 64 * 1024): Generator<Buffer> {
  let parts: Buffer[] = [];
  let size = 0; // as counted for chunking (6 bytes of prefix per op, as always)
  let length = 0;
  /** The runs the message holds so far, while it holds nothing else; null once it does. */
  let pageRuns: Run[] | null = [];
  const add = (op: FramedOp) => {
    parts.push(op.framed);
    size += op.opLength + 6;
    length += op.framed.length;
    pageRuns = null;
  };
  const take = (): Buffer => {
    const message = pageRuns && pageRuns.length > 0 ? pageMessage(pageRuns, parts, length) : Buffer.concat(parts, length);
    parts = [];
    size = length = 0;
    pageRuns = [];
    return message;
  };
  if (batch.reset) add(RESET_OP);
  const ops = batch.ops;
  for (let i = 0; i < ops.length;) {
    const run = batch.reset ? runAt(ops, i) : undefined;
    if (run && run.size < chunkBytes) {
      if (size + run.size > chunkBytes) yield take();
      parts.push(run.framed);
      length += run.framed.length;
      size += run.size;
      pageRuns?.push(run);
      i += RUN;
      continue;
    }
    if (run) {
      // A run bigger than a message (large items): cut it where the size reaches chunkBytes.
      pageRuns = null;
      let from = 0, start = 0;
      for (let j = 0; j < RUN; j++) {
        size += run.sizes[j];
        if (size < chunkBytes) continue;
        parts.push(run.framed.subarray(start, run.ends[j]));
        length += run.ends[j] - start;
        yield take();
        pageRuns = null;
        from = j + 1;
        start = run.ends[j];
      }
      if (from < RUN) {
        parts.push(run.framed.subarray(start));
        length += run.framed.length - start;
      }
      i += RUN;
      continue;
    }
    const o = ops[i++];
    add(typeof o === 'string' ? frame(w.Op.encode({ delete: { key: o } }).finish()) : setOp(o));
    if (size >= chunkBytes) yield take();
  }
  add(frame(w.Op.encode({ sync: { revision: batch.revision, items } }).finish()));
  yield take();
}

/** Client side: throws on garbage (gRPC then fails the call and the client reconnects). */
export function decodeOpBatch(buf: Buffer): WireOp[] {
  const m = w.OpBatch.decode(buf);
  const ops: WireOp[] = [];
  for (const op of m.ops) {
    // normalizeItem copies the decoded message into the strict shape (every field filled).
    if (op.set) ops.push({ op: 'set', item: normalizeItem(op.set) });
    else if (op.delete) ops.push({ op: 'delete', key: op.delete.key ?? '' });
    else if (op.sync) ops.push({ op: 'sync', revision: Number(op.sync.revision ?? 0), items: op.sync.items ?? 0 });
    else if (op.reset) ops.push({ op: 'reset' });
    else throw new Error('an op with no operation');
  }
  return ops;
}

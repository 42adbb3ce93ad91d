// The Watch messages (proto/watch.proto) on the wire: protobufjs static code does the
// encoding; this file adds what gRPC needs (serializers that never throw on the server side)
// and a per-item cache so that an item shared by many clients is encoded once.
import { kpng } from '../gen/proto';
import { normalizeItem, wireItem, type Item } from '../model/enls';
import { SHARED_BLOCK } from '../store/item-store';
import type { OpList } from '../store/subscription';
import { assemble, deflatePiece, deflateWhole, inflateOps } from './deflate';

const w = kpng.watchv1;

export const WATCH_METHOD = '/kpng.watchv1.Watch/Watch';

export interface WatchRequest {
  node: string;
  reset: boolean;
  appliedRevision: number;
  /** The client reads OpBatch.deflated_ops (proto/watch.proto). */
  acceptDeflate: boolean;
}

/** A request the server could not decode (garbage, wrong wire types). */
export interface BadRequest { bad: string }

export const isBadRequest = (r: WatchRequest | BadRequest): r is BadRequest => 'bad' in r;

export function encodeRequest(r: Partial<WatchRequest>): Buffer {
  return Buffer.from(w.WatchRequest.encode({ node: r.node ?? '', reset: !!r.reset, appliedRevision: r.appliedRevision ?? 0, acceptDeflate: !!r.acceptDeflate }).finish());
}

/** Server side: never throws (a malformed request becomes a BadRequest answered with INVALID_ARGUMENT). */
export function decodeRequest(buf: Buffer): WatchRequest | BadRequest {
  try {
    const m = w.WatchRequest.decode(buf);
    if (typeof m.node !== 'string') return { bad: 'node is not a string' };
    const rev = Number(m.appliedRevision ?? 0);
    return { node: m.node, reset: !!m.reset, appliedRevision: Number.isFinite(rev) ? rev : 0, acceptDeflate: !!m.acceptDeflate };
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

/** The bytes before a length-delimited field of `length` bytes: its tag byte, then the length (varint). */
function fieldPrefix(tag: number, length: number): Buffer {
  const b = Buffer.allocUnsafe(6);
  b[0] = tag;
  let n = 1;
  let v = length;
  while (v > 127) { b[n++] = (v & 127) | 128; v >>>= 7; }
  b[n++] = v;
  return b.subarray(0, n);
}

/** OpBatch's fields as tag bytes: 1 (ops) and 2 (deflated_ops), both length-delimited. */
const OPS_TAG = 0x0a, DEFLATED_OPS_TAG = 0x12;

/** An OpBatch message whose only field is deflated_ops, holding the stream made of these parts. */
function wrapOpBatch(stream: readonly Buffer[], length: number): Buffer {
  const head = fieldPrefix(DEFLATED_OPS_TAG, length);
  return Buffer.concat([head, ...stream], head.length + length);
}

function frame(op: Uint8Array): FramedOp {
  const prefix = fieldPrefix(OPS_TAG, op.length);
  return { framed: Buffer.concat([prefix, op]), opLength: op.length };
}

function setOp(item: Item): FramedOp {
  let f = setOpCache.get(item);
  if (!f) setOpCache.set(item, (f = frame(w.Op.encode({ set: wireItem(item) }).finish())));
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
interface Run {
  items: readonly Item[]; framed: Buffer; ends: Int32Array; sizes: Int32Array; size: number;
  /** `framed` compressed as a piece of a DEFLATE stream (deflate.ts), made when first sent so. */
  piece?: Buffer;
}
const RUN = SHARED_BLOCK;
const runs = new WeakMap<Item, Run>();
const runSeen = new WeakMap<Item, Item[]>();
/** Runs of the lists' shared blocks (ItemList.sharedBlock), by block: null when seen once. */
const blockRuns = new WeakMap<readonly Item[], Run | null>();

function runAt(ops: OpList, i: number): Run | undefined {
  if (i % RUN !== 0 || i + RUN > ops.length) return undefined;
  // A list that knows its shared blocks says so in one call: no RUN reads and compares (10M of
  // each for a thousand nodes' full states of 10k services).
  const block = ops.sharedBlock?.(i);
  if (block) {
    const run = blockRuns.get(block);
    if (run) return run;
    if (run === undefined) { blockRuns.set(block, null); return undefined; }
    const built = buildRun(block);
    blockRuns.set(block, built);
    return built;
  }
  const first = ops.at(i);
  if (typeof first !== 'object') return undefined;
  const same = (items: readonly Item[]) => { for (let j = 1; j < RUN; j++) if (ops.at(i + j) !== items[j]) return false; return true; };
  const run = runs.get(first);
  if (run && same(run.items)) return run;
  const seen = runSeen.get(first);
  const items: Item[] = [];
  for (let j = 0; j < RUN; j++) { const o = ops.at(i + j); if (typeof o !== 'object') return undefined; items.push(o); }
  if (!seen || !same(seen)) {
    runSeen.set(first, items);
    return undefined;
  }
  runSeen.delete(first);
  const built = buildRun(items);
  runs.set(first, built);
  return built;
}

function buildRun(items: readonly Item[]): Run {
  const parts = items.map(setOp);
  const ends = new Int32Array(RUN), sizes = new Int32Array(RUN);
  let end = 0, size = 0;
  parts.forEach((p, j) => { end += p.framed.length; ends[j] = end; sizes[j] = p.opLength + 6; size += sizes[j]; });
  return { items, framed: Buffer.concat(parts.map((p) => p.framed), end), ends, sizes, size };
}

/**
 * A whole message made of runs only, kept as one buffer: the same message recurs in the full
 * state of every node that has nothing of its own there, and is then handed to gRPC as it is
 * (no copy of ours, which for a thousand nodes of a large cluster is gigabytes). Built the second
 * time it is met, like a run; keyed by its first run.
 */
interface Page {
  runs: Run[]; message: Buffer;
  /** The same ops as one deflated_ops message, made when first sent so. */
  deflated?: Buffer;
}
const pages = new WeakMap<Run, Page>();
const pageSeen = new WeakMap<Run, Run[]>();

/** The kept page of these runs, if it was met before (kept the second time); undefined the first time. */
function pageOf(pageRuns: Run[], parts: Buffer[], length: number): Page | undefined {
  const first = pageRuns[0]!;
  const same = (rs: Run[]) => rs.length === pageRuns.length && rs.every((r, k) => r === pageRuns[k]);
  const page = pages.get(first);
  if (page && same(page.runs)) return page;
  const seen = pageSeen.get(first);
  if (seen && same(seen)) {
    pageSeen.delete(first);
    const kept = { runs: pageRuns, message: Buffer.concat(parts, length) };
    pages.set(first, kept);
    return kept;
  }
  pageSeen.set(first, pageRuns);
  return undefined;
}

/**
 * A message as deflated_ops, when it holds at least one run: each run's piece is compressed once
 * and shared; the other ops go in stored blocks. Undefined when there is nothing compressed to
 * send (plain is then as small and cheaper to read).
 */
function deflatedMessage(parts: readonly Buffer[], partRuns: readonly (Run | undefined)[]): Buffer | undefined {
  if (!partRuns.some((r) => r)) return undefined;
  const stream = assemble(parts.map((p, k) => {
    const run = partRuns[k];
    return run ? { piece: (run.piece ??= deflatePiece(run.framed)) } : p;
  }));
  return wrapOpBatch(stream.parts, stream.length);
}

/**
 * Encodes a batch as OpBatch messages of about `chunkBytes` each: Reset first when the batch
 * is a reset, then the ops (an Item is a set, a string the key of a delete), then Sync. Returns
 * the messages lazily so a slow client's stream encodes only as fast as it drains. A full state's
 * messages are cut before a run of shared ops rather than inside it, so that most of them are made
 * of whole runs and are the same buffers on every node (see Page). With `deflate` (the client
 * accepts deflated_ops) a message that holds shared runs goes compressed, from pieces compressed
 * once (deflate.ts); the rest stays plain.
 */
export function* encodeBatch(batch: { reset: boolean; ops: OpList; revision: number }, items: number, chunkBytes = 64 * 1024, deflate = false): Generator<Buffer> {
  let parts: Buffer[] = [];
  /** With deflate: the run each part is, if it is a whole one. */
  let partRuns: (Run | undefined)[] = [];
  let size = 0; // as counted for chunking (6 bytes of prefix per op, as always)
  let length = 0;
  /** The runs the message holds so far, while it holds nothing else; null once it does. */
  let pageRuns: Run[] | null = [];
  const add = (op: FramedOp) => {
    parts.push(op.framed);
    if (deflate) partRuns.push(undefined);
    size += op.opLength + 6;
    length += op.framed.length;
    pageRuns = null;
  };
  const take = (): Buffer => {
    const page = pageRuns && pageRuns.length > 0 ? pageOf(pageRuns, parts, length) : undefined;
    let message: Buffer | undefined;
    if (page) message = deflate ? (page.deflated ??= wrapOne(deflateWhole(page.message))) : page.message;
    else if (deflate) message = deflatedMessage(parts, partRuns);
    message ??= Buffer.concat(parts, length);
    parts = [];
    partRuns = [];
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
      if (deflate) partRuns.push(run);
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
        if (deflate) partRuns.push(undefined);
        length += run.ends[j] - start;
        yield take();
        pageRuns = null;
        from = j + 1;
        start = run.ends[j];
      }
      if (from < RUN) {
        parts.push(run.framed.subarray(start));
        if (deflate) partRuns.push(undefined);
        length += run.framed.length - start;
      }
      i += RUN;
      continue;
    }
    const o = ops.at(i++)!;
    add(typeof o === 'string' ? frame(w.Op.encode({ delete: { key: o } }).finish()) : setOp(o));
    if (size >= chunkBytes) yield take();
  }
  add(frame(w.Op.encode({ sync: { revision: batch.revision, items } }).finish()));
  yield take();
}

const wrapOne = (stream: Buffer): Buffer => wrapOpBatch([stream], stream.length);

/** Inflated ops of one message at most (a server's messages are ~64 KiB; this bounds a hostile one). */
export const MAX_INFLATED_BYTES = 64 * 1024 * 1024;

/** Client side: throws on garbage (gRPC then fails the call and the client reconnects). */
export function decodeOpBatch(buf: Buffer): WireOp[] {
  const m = w.OpBatch.decode(buf);
  let list: (typeof m.ops)[number][] = m.ops;
  if (m.deflatedOps && m.deflatedOps.length > 0) {
    const inner = w.OpBatch.decode(inflateOps(m.deflatedOps, MAX_INFLATED_BYTES));
    if (inner.deflatedOps && inner.deflatedOps.length > 0) throw new Error('deflated_ops inside deflated_ops');
    list = list.concat(inner.ops);
  }
  const ops: WireOp[] = [];
  for (const op of list) {
    // normalizeItem copies the decoded message into the strict shape (every field filled).
    if (op.set) ops.push({ op: 'set', item: normalizeItem(op.set) });
    else if (op.delete) ops.push({ op: 'delete', key: op.delete.key ?? '' });
    else if (op.sync) ops.push({ op: 'sync', revision: Number(op.sync.revision ?? 0), items: op.sync.items ?? 0 });
    else if (op.reset) ops.push({ op: 'reset' });
    else throw new Error('an op with no operation');
  }
  return ops;
}

// nftables backend: `kpng ... --to nft`. The ruleset's design: docs/backends/nft.md.
import type { NativeCallOptions } from '../../native/nft-types';
import { NftBatch } from '../../native/encode';
import { expr } from '../../native/nft-expr';
import * as native from '../../native';
import type { Sink } from '../../sink/sink';
import { ElemWriter, toNftOps } from './netlink';
import { nftKernelSink, type NftKernel, type NftSinkOptions } from './sink';
import { ELEM_CHUNK, type FamOps } from './types';
import { Yielder } from '../../util/yielder';
import { startNftMonitor, type NftMonitor } from '../../native/nft-monitor';
import { listLinks } from '../../native/rtnl';
import { FastPath, type FastPathConfig } from './fast-path';

export { NftDataplane, nftKernelSink, type NftKernel, type NftSinkOptions } from './sink';
export { toNftOps } from './netlink';
export { FastPath, parseFastPathInterfaces, DEFAULT_MIN_PACKETS, type FastPathConfig } from './fast-path';
export { toNftText } from './text';

/** The production kernel: one atomic netlink batch per apply, through the native addon. */
export function nativeKernel(callOpts: NativeCallOptions = {}): NftKernel {
  let monitor: NftMonitor | undefined;
  // Applies in flight: the monitor leaves the notification group while any runs (its own commits are
  // no news, and a full sync's notifications, one per element, would flood it).
  let applying = 0;
  return {
    async apply(table, famOps, waiting) {
      const batch = await encodeFamOps(table, famOps);
      if (applying++ === 0) monitor?.pause();
      try {
        const applied = native.nftApply(batch, callOpts);
        waiting?.();
        const r = await applied;
        return { messages: r.messages, bytes: r.bytes, ms: r.ms + (r.encodeMs ?? 0) };
      } finally {
        if (--applying === 0) monitor?.resume();
      }
    },
    // One conntrack dump per family for all filters; run after the rules are in place.
    conntrackDelete: (filters) => native.conntrackDelete(filters, callOpts),
    watchForeign(onCommit) {
      monitor?.close();
      monitor = startNftMonitor(onCommit, callOpts);
      if (applying > 0) monitor.pause();
    },
    async close() {
      monitor?.close();
      monitor = undefined;
      native.nftCloseSockets();
    },
  };
}

/**
 * A first buffer near the batch's size (it doubles when short). A large fixed buffer for every batch
 * would make each one-endpoint change (a few hundred bytes) allocate that much outside the JS heap,
 * and that external memory drives V8 into frequent full GCs under churn.
 */
export function batchSizeHint(famOps: FamOps[]): number {
  // Packed elements are counted exactly: a full sync's batch is then allocated once, not doubled
  // up to its size (copying each time).
  let n = 0, packed = 0;
  for (const f of famOps) {
    for (const op of f.ops) {
      if (op.kind === 'addPacked') packed += op.elems.items.byteLength + 256 * Math.ceil(op.elems.count / ELEM_CHUNK);
      else n += 256 + (op.kind === 'addElems' || op.kind === 'delElems' ? op.elems.length * 48 : 0);
    }
  }
  return Math.min(1 << 20, Math.max(4096, n)) + packed;
}

/** Elements written between two checks of the event-loop budget (well under one slice of encoding). */
export const ELEM_SLICE = 4096;

/**
 * The addon's batch for ops of both families, built in slices: a full sync's hundreds of thousands
 * of objects are converted and encoded with a turn of the event loop every few milliseconds.
 */
export async function encodeFamOps(table: string, famOps: FamOps[], y = new Yielder()): Promise<NftBatch> {
  const batch = new NftBatch(batchSizeHint(famOps));
  const elems = new ElemWriter();
  for (const f of famOps) {
    for (const op of f.ops) {
      // Elements (nearly all of a full sync) are written straight into the batch.
      if (op.kind === 'addElems' || op.kind === 'delElems') {
        // A 50k-service vips map is one op of 50k elements: written in slices (one message each).
        const kind = op.kind === 'addElems' ? 'add' : 'delete';
        if (op.elems.length <= ELEM_SLICE) elems.write(batch, f.fam, table, kind, op.set, op.elems);
        else {
          for (let i = 0; i < op.elems.length; i += ELEM_SLICE) {
            elems.write(batch, f.fam, table, kind, op.set, op.elems.slice(i, i + ELEM_SLICE));
            if (y.due()) await y.turn();
          }
        }
      } else if (op.kind === 'addPacked') {
        // Encoded as the services rendered: copied, one element op per chunk.
        const p = op.elems;
        for (const c of p.chunks()) {
          batch.beginElements('add', { family: f.fam, table, set: op.set }, (i) => p.text(c.first + i));
          batch.appendElements(p.items, c.from, c.to);
          if (y.due()) await y.turn();
        }
      } else for (const o of toNftOps(f.fam, table, [op])) batch.add(o);
      if (y.due()) await y.turn();
    }
  }
  return batch;
}

export function createNftSink(opts: NftSinkOptions & { netns?: string; kernel?: NftKernel; flowtable?: FastPathConfig }): Sink {
  const call: NativeCallOptions = opts.netns ? { netns: opts.netns } : {};
  const fastPath = opts.flowtable ? new FastPath(opts.flowtable, {
    listLinks: () => listLinks(call),
    probe: () => probeFlowtables(call),
    log: opts.log,
  }) : undefined;
  return nftKernelSink({ ...opts, fastPath }, opts.kernel ?? nativeKernel(call));
}

/**
 * Whether the kernel takes a flowtable and a rule offloading to it: one batch that creates a scratch
 * table holding both and deletes it again, so that it changes nothing either way.
 */
export async function probeFlowtables(call: NativeCallOptions = {}): Promise<void> {
  const t = { family: 'ip' as const, table: 'kpng-flowtable-probe' };
  await native.nftApply([
    { op: 'add', table: { family: t.family, name: t.table } },
    { op: 'add', flowtable: { ...t, name: 'probe', devices: [] } },
    { op: 'add', chain: { ...t, name: 'probe' } },
    { op: 'add', rule: { ...t, chain: 'probe', exprs: [expr.flowOffload('probe')] } },
    { op: 'delete', table: { family: t.family, name: t.table } },
  ], call);
}

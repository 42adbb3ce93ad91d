// nftables backend: `kpng ... --to nft`. See README.md beside this file for the ruleset design.
import type { ConntrackFilter, NftOp, ApplyResult, NativeCallOptions } from '../../native/nft-types';
import type { Sink } from '../../sink/sink';
import { toNftOps } from './netlink';
import { NftSink, type NftKernel, type NftSinkOptions } from './sink';

export { NftSink, type NftKernel, type NftSinkOptions, type NftSinkStats } from './sink';
export { toNftOps } from './netlink';
export { toNftText } from './text';

interface NativeNft {
  nftApply(ops: NftOp[], opts?: NativeCallOptions): Promise<ApplyResult>;
  conntrackDelete(filters: ConntrackFilter[], opts?: NativeCallOptions): Promise<number | { deleted: number }>;
}

function loadNative(): NativeNft {
  // Loaded on first use so that other sinks work on machines without the addon.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('../../native') as NativeNft;
}

/** The production kernel: one atomic netlink batch per apply, through the native addon. */
export function nativeKernel(callOpts: NativeCallOptions = {}): NftKernel {
  let native: NativeNft | undefined;
  const get = () => (native ??= loadNative());
  return {
    async apply(table, famOps) {
      const ops: NftOp[] = [];
      for (const f of famOps) ops.push(...toNftOps(f.fam, table, f.ops));
      const r = await get().nftApply(ops, callOpts);
      return { messages: r.messages, bytes: r.bytes, ms: r.ms + (r.encodeMs ?? 0) };
    },
    async conntrackDelete(filters) {
      const r = await get().conntrackDelete(filters, callOpts);
      return typeof r === 'number' ? r : r?.deleted ?? 0;
    },
  };
}

export function createNftSink(opts: NftSinkOptions & { netns?: string; kernel?: NftKernel }): Sink {
  return new NftSink(opts, opts.kernel ?? nativeKernel(opts.netns ? { netns: opts.netns } : {}));
}

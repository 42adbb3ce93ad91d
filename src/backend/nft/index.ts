// nftables backend: `kpng ... --to nft`. See README.md beside this file for the ruleset design.
import type { NftOp, NativeCallOptions } from '../../native/nft-types';
import * as native from '../../native';
import { pushAll } from '../../util/push-all';
import type { Sink } from '../../sink/sink';
import { toNftOps } from './netlink';
import { nftKernelSink, type NftKernel, type NftSinkOptions } from './sink';

export { NftDataplane, nftKernelSink, type NftKernel, type NftSinkOptions } from './sink';
export { toNftOps } from './netlink';
export { toNftText } from './text';

/** The production kernel: one atomic netlink batch per apply, through the native addon. */
export function nativeKernel(callOpts: NativeCallOptions = {}): NftKernel {
  return {
    async apply(table, famOps) {
      const ops: NftOp[] = [];
      for (const f of famOps) pushAll(ops, toNftOps(f.fam, table, f.ops));
      const r = await native.nftApply(ops, callOpts);
      return { messages: r.messages, bytes: r.bytes, ms: r.ms + (r.encodeMs ?? 0) };
    },
    // One conntrack dump per family for all filters; run after the rules are in place.
    conntrackDelete: (filters) => native.conntrackDelete(filters, callOpts),
    async close() { native.nftCloseSockets(); },
  };
}

export function createNftSink(opts: NftSinkOptions & { netns?: string; kernel?: NftKernel }): Sink {
  return nftKernelSink(opts, opts.kernel ?? nativeKernel(opts.netns ? { netns: opts.netns } : {}));
}

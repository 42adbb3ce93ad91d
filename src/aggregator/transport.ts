// Where the aggregator's batches go. Production: the native addon, ONE nftables transaction per
// apply; unit tests use a fake that records batches and refuses chosen objects.
import * as native from '../native';
import type { ApplyResult, NativeCallOptions, NftOp } from '../native/nft-types';

export interface NftTransport {
  /**
   * Applies ops atomically. On refusal it throws an NftApplyError whose `failed[].index` are
   * positions in `ops` (then nothing was applied).
   */
  apply(ops: NftOp[]): Promise<ApplyResult>;
}

export function nativeTransport(opts: NativeCallOptions = {}): NftTransport {
  return { apply: (ops) => native.nftApply(ops, opts) };
}

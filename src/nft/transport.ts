// The kernel seam for NftOp batches (the addon's netlink vocabulary): where the aggregator's
// transactions and the IPVS companion table's go. Production: the native addon, ONE nftables
// transaction per apply; tests: FakeNft's (fakeNftTransport in src/backend/nft/fake.ts).
import * as native from '../native';
import { startNftMonitor, type NftForeignCommit, type NftMonitor } from '../native/nft-monitor';
import type { ApplyResult, NativeCallOptions, NftOp } from '../native/nft-types';

export interface NftTransport {
  /**
   * Applies ops atomically. On refusal it throws an NftApplyError whose `failed[].index` are
   * positions in `ops` (then nothing was applied).
   */
  apply(ops: NftOp[]): Promise<ApplyResult>;
  /**
   * Calls `onCommit` for every nftables transaction another process commits (or when notifications
   * were lost); absent: the transport cannot watch. Throws when the watch cannot start.
   */
  watchForeign?(onCommit: (c: NftForeignCommit) => void): void;
  close?(): void;
}

export function nativeTransport(opts: NativeCallOptions = {}): NftTransport {
  let monitor: NftMonitor | undefined;
  // While a transaction of ours is in flight the monitor leaves the notification group: our own
  // commits are no news, and a large one's notifications would flood it.
  let applying = 0;
  return {
    async apply(ops) {
      if (applying++ === 0) monitor?.pause();
      try {
        return await native.nftApply(ops, opts);
      } finally {
        if (--applying === 0) monitor?.resume();
      }
    },
    watchForeign(onCommit) {
      monitor?.close();
      monitor = startNftMonitor(onCommit, opts);
      if (applying > 0) monitor.pause();
    },
    close() {
      monitor?.close();
      monitor = undefined;
    },
  };
}

// kpng's nft backend as a producer: an NftKernel that hands the backend's ops to the aggregator
// instead of the addon. The backend's table resets (full syncs) become "replace this table" in the
// aggregator, so a periodic full sync still repairs whatever drifted in the kernel.
import { pushAll } from '../../util/push-all';
import { toNftOps } from './netlink';
import type { NftKernel } from './sink';
import type { ConntrackFilter, NftOp } from '../../native/nft-types';
import type { ProducerHandle } from '../../aggregator/aggregator';

export function aggregatorKernel(producer: ProducerHandle, conntrackDelete: (filters: ConntrackFilter[]) => Promise<number>): NftKernel {
  return {
    async apply(table, famOps) {
      const ops: NftOp[] = [];
      for (const f of famOps) pushAll(ops, toNftOps(f.fam, table, f.ops));
      const r = await producer.apply(ops);
      return { messages: r.messages, bytes: r.bytes, ms: r.ms };
    },
    conntrackDelete,
  };
}

// The node's aggregator inside a kpng process (`--to nft --aggregator`): one Aggregator writing
// through the native addon, kpng's nft backend connected to it as producer "kpng".
import * as native from '../native';
import type { NftKernel } from '../backend/nft/sink';
import { Aggregator } from './aggregator';
import { aggregatorKernel } from './nft-kernel';
import { nativeTransport } from './transport';

let nodeAggregator: Aggregator | undefined;

/** The process's aggregator (created on first use); other producers in the process connect to it. */
export function getNodeAggregator(opts: { netns?: string; log?: (m: string) => void } = {}): Aggregator {
  nodeAggregator ??= new Aggregator({ transport: nativeTransport(opts.netns ? { netns: opts.netns } : {}), log: opts.log });
  return nodeAggregator;
}

/** kpng's nft backend as producer "kpng" of the node's aggregator. */
export function nodeAggregatorKernel(opts: { netns?: string; log?: (m: string) => void } = {}): NftKernel {
  const producer = getNodeAggregator(opts).connect('kpng', { peer: `pid ${process.pid} (in process)` });
  const callOpts = opts.netns ? { netns: opts.netns } : {};
  return aggregatorKernel(producer, (filters) => native.conntrackDelete(filters, callOpts));
}

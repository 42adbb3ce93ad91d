// The node's aggregator inside a kpng process (`--to nft --aggregator`): one Aggregator writing
// through the native addon, kpng's nft backend connected to it as producer "kpng".
import * as native from '../native';
import type { NftKernel } from '../backend/nft/sink';
import { Aggregator } from './aggregator';
import { aggregatorKernel } from './nft-kernel';
import { nativeTransport } from './transport';
import { serveAggregator, type AggregatorServer } from './server';
import type { Logger } from '../util/log';

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

/** Serves the node's aggregator to outside producers (`--aggregator-listen`). */
export function serveNodeAggregator(listen: string, log: Logger): Promise<AggregatorServer> {
  return serveAggregator(getNodeAggregator(), { listen, log });
}

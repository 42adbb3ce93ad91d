// The node's aggregator inside a kpng process (`--to nft|ebpf|ipvs --aggregator`): one Aggregator
// writing through the native addon (nftables transactions, and IPVS batches), kpng's backend connected
// to it as producer "kpng".
import * as native from '../../native';
import { ipvsApply, type IpvsApplyResult, type IpvsOp } from '../../native/ipvs';
import type { NftKernel } from '../nft/sink';
import type { Sink } from '../../sink/sink';
import { Aggregator, type ProducerHandle } from '../../aggregator/aggregator';
import type { AggregatorFlags } from '../../aggregator/flags';
import { aggregatorKernel } from '../nft/aggregator-kernel';
import { nativeTransport, type NftTransport } from '../../nft/transport';
import { serveAggregator, type AggregatorServer } from '../../aggregator/server';
import type { Logger } from '../../util/log';

export interface NodeAggregatorOptions { netns?: string; log?: (m: string) => void; minIntervalMs?: number; burst?: number }

let nodeAggregator: Aggregator | undefined;
let kpngProducer: ProducerHandle | undefined;

/** The process's aggregator (created on first use); other producers in the process connect to it. */
export function getNodeAggregator(opts: NodeAggregatorOptions = {}): Aggregator {
  const call = opts.netns ? { netns: opts.netns } : {};
  nodeAggregator ??= new Aggregator({
    transport: nativeTransport(call), ipvs: { apply: (ops) => ipvsApply(ops, call) },
    minIntervalMs: opts.minIntervalMs, burst: opts.burst, log: opts.log,
  });
  return nodeAggregator;
}

/** kpng's own producer ("kpng") of the node's aggregator: one per process, whichever backend runs. */
export function nodeProducer(opts: NodeAggregatorOptions = {}): ProducerHandle {
  kpngProducer ??= getNodeAggregator(opts).connect('kpng', { peer: `pid ${process.pid} (in process)` });
  return kpngProducer;
}

/** kpng's nft backend (or the eBPF backend's nft part) as producer "kpng" of the node's aggregator. */
export function nodeAggregatorKernel(opts: NodeAggregatorOptions = {}): NftKernel {
  const callOpts = opts.netns ? { netns: opts.netns } : {};
  return aggregatorKernel(nodeProducer(opts), (filters) => native.conntrackDelete(filters, callOpts));
}

/** The IPVS backend's two kernel paths through the node's aggregator, as producer "kpng". */
export function nodeIpvsPaths(opts: NodeAggregatorOptions = {}): {
  nft: NftTransport;
  ipvs: (ops: IpvsOp[]) => Promise<IpvsApplyResult>;
} {
  const producer = nodeProducer(opts);
  const batcher = getNodeAggregator(opts).ipvs!;
  return {
    nft: { apply: async (ops) => { const r = await producer.apply(ops); return { messages: r.messages, bytes: r.bytes, ms: r.ms, encodeMs: 0 }; } },
    ipvs: (ops) => batcher.send(producer.name, ops),
  };
}

/** Serves the node's aggregator to outside producers (`--aggregator-listen`). */
export function serveNodeAggregator(listen: string, log: Logger): Promise<AggregatorServer> {
  return serveAggregator(getNodeAggregator(), { listen, log });
}

/** A backend's sink, plus the outside producers' socket when asked for; closing the sink closes both. */
export async function withAggregatorServer(sink: Sink, flags: AggregatorFlags, log: Logger): Promise<Sink> {
  if (!flags.listen) return sink;
  const server = await serveNodeAggregator(flags.listen, log);
  const close = sink.close?.bind(sink);
  sink.close = async () => { await server.close(); await close?.(); };
  return sink;
}

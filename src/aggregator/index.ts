// The aggregator: several producers' nftables objects in one atomic, rate-limited transaction.
export { Aggregator, ProducerRefused, type AggregatorOptions, type CommitInfo, type ProducerEvent, type ProducerFailure, type ProducerHandle, type ProducerStatus } from './aggregator';
export { DeclarationError, type ProducerState } from './state';
export { diffStates } from './diff';
export { nativeTransport, type NftTransport } from './transport';

// The aggregator: several producers' nftables objects in one atomic, rate-limited transaction.
export { Aggregator, DeclarationError, ProducerRefused, type AggregatorOptions, type CommitInfo, type ProducerEvent, type ProducerFailure, type ProducerHandle, type ProducerState, type ProducerStatus } from './aggregator';
export { diffStates } from './diff';
export { nativeTransport, type NftTransport } from '../nft/transport';
export { compileRule, RuleError, type RuleSpec, type RuleMatch, type RuleVerdict, type RuleContext, type MatchField } from './rules';
export { parseObjects, ObjectsError } from './objects';
export { parsePatch, type Patch } from './patch';

// kpng as a library: `import { watchLocalState, type Backend } from 'kpng'`.
//
// - The ENLS (expected node-local state) as strict TypeScript types: Item, Service,
//   ServicePort, EndpointList (endpoints by column), NodeInfo... and its protobuf codec.
// - The Sink contract (Batch, Change, StateView) that kpng's own backends implement.
// - Receiving a node's state, in-process or from another kpng over its API socket, as full
//   state (Backend.onState) or incremental changes (Backend.onChange).
// - The building blocks behind them, for those who need more control.
// See examples/print-backend.ts for a backend to copy.

// The ENLS.
export type { IPSet, Port, Endpoint, Route, Routes, ServicePort, SessionAffinity, Service, NodeInfo, Item } from './model/enls';
export { EndpointList, Protocol, Target, IPFamily, NODE_KEY, serviceKey, encodeItem, decodeItem, normalizeItem, wireItem, protocolName, ofFamily, pb } from './model/enls';
export { routeEndpoints, externalRoutesOf, describeRoute, describeRoutes, targetName } from './model/views';
export { modelOptions, DEFAULT_MODEL_OPTIONS, type ModelOptions } from './model/options';

// Backends: the registry (`kpng --to NAME`, `kpng --plugin MODULE`) and the shared kernel-backend layer.
export { registerBackend, getBackend, listBackends, type BackendDefinition, type BackendContext, type BackendFlag, type FlagValue } from './backend/registry';
export { KernelSink, type KernelSinkOptions, type KernelSinkStats } from './backend/kernel/kernel-sink';
export type { Dataplane, ServiceChange, SyncReport } from './backend/kernel/dataplane';

// The sink contract.
export type { Change, Batch, StateView, Sink } from './sink/sink';

// Receiving a node's state.
export type { Backend, WatchOptions, StateWatch } from './api/backend';
export { watchLocalState, watchFileState, watchClusterState, watchItemStore, backendSink } from './api/backend';

// The API: serving every node's state, following one node's state.
export type { TlsFiles } from './util/address';
export type { ServeApiOptions, ApiServer } from './api/server';
export { serveApi } from './api/server';
export type { WatchClientOptions, ReceivedBatch, BatchHandler, ClientStats, ApiSource } from './api/client';
export { WatchClient, startApiSource, applyBatch } from './api/client';
export { DEFAULT_API, parseApiAddress } from './util/address';

// Building blocks.
export { ClusterStore, type ClusterChange, type ClusterStoreOptions, type Kind } from './store/cluster';
export { ItemStore, itemHash } from './store/item-store';
export { NodeState } from './store/node-state';
export { Subscription } from './store/subscription';
export { FileSource, type FileSourceOptions } from './source/file-source';
export { runSink, type RunnerOptions, type RunnerStats } from './runner';
export { routeRows, formatRoutesJsonl, formatRoutesTable, type RouteRow } from './sink/routes';
export { describeItem } from './sink/trace';
export { createLogger, silentLogger, type Logger, type Level } from './util/log';

// Fakes of the kernel seams, for tests of code built on kpng: each in memory, with the kernel's rules,
// and a faulty variant failing chosen or seeded calls with the errors the kernel returns there.
/** nftables in memory (FakeNft), its two seams (an NftKernel and an NftTransport over it), and comparable content. */
export { FakeNft, FakeTable, NftFakeError, fakeNftKernel, fakeNftTransport, tableContent, addrBytes, inCidr, type TableContent } from './backend/nft/fake';
/** The model FakeNft's kernel state is (and the aggregator's): NftOps with the kernel's meaning, a sorted dump. */
export { applyOps, checkOps, dumpRuleset, type Ruleset } from './nft/ruleset';
export type { NftTransport } from './nft/transport';
/** An NftKernel refusing batches (ENOMEM, EBUSY, ENFILE, ENOBUFS), losing their acknowledgement (EPROTO), failing conntrack deletes; an NftTransport refusing chosen ops. */
export { FaultyNftKernel, FaultyNftTransport, REFUSED_ERRNOS, type NftFault, type NftFaultPlan } from './backend/nft/faulty';
/** The IPVS dataplane's kernel (IpvsKernel + IpvsPaths) in memory: virtual and real servers, addresses, companion batches. */
export { FakeIpvsKernel } from './backend/ipvs/fake';
/** FakeIpvsKernel refusing IPVS messages (ENOMEM) or losing their replies, refusing addresses, rejecting the companion batch. */
export { FaultyIpvsKernel } from './backend/ipvs/faulty';
/** The socket LB's two BPF maps in memory behind EbpfMaps, read back as a connect() resolves them. */
export { FakeEbpfMaps } from './backend/ebpf/fake';
export type { EbpfMaps } from './native/ebpf';
/** FakeEbpfMaps failing batches partway (E2BIG, ENOMEM, EBUSY), dumps (ENOMEM), socket destruction (EOPNOTSUPP). */
export { FaultyEbpfMaps, MAP_UPDATE_ERRNOS, type EbpfFaultPlan } from './backend/ebpf/faulty';
/** /proc/sys and /sys in memory behind SysctlIO. */
export { FakeSysctl } from './config/fake';
export type { SysctlIO } from './config/conntrack';
/** FakeSysctl failing chosen writes (EROFS, EACCES, EPERM, EINVAL) and reads. */
export { FaultySysctl, type SysctlFault } from './config/faulty';

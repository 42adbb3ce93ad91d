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

// Receiving a node's ENLS as a third party (KEP-2104's kube-proxy library idea): write a
// Backend with onChange (incremental) and/or onState (full state) and attach it to a source:
//   watchLocalState({ api: 'unix:///run/kpng/kpng.sock', node }, backend)   another kpng's API
//   watchFileState({ file: 'cluster.yaml', node }, backend)                 a kubectl dump
//   watchClusterState({ cluster, node }, backend)                           your own ClusterStore
// Each call returns at once; the backend is called after the first complete state and then
// after each change (coalesced while it is busy, at most once per minSyncPeriodMs). A backend
// that throws gets the full state again after a backoff.
import type { Batch, Sink, StateView } from '../sink/sink';
import { ClusterStore } from '../store/cluster';
import type { ItemStore } from '../store/item-store';
import { NodeState } from '../store/node-state';
import { FileSource } from '../source/file-source';
import { runSink, type RunnerStats } from '../runner';
import { createLogger, type Logger } from '../util/log';
import type { TlsFiles } from '../util/address';
import { startApiSource } from './client';
import { DEFAULT_API } from '../util/address';

export interface Backend {
  /** Shown in logs (default "backend"). */
  name?: string;
  /**
   * Incremental: the Set/Delete changes that bring you to `batch.revision`. When
   * `batch.reset` is true, drop everything you had first (the changes are the whole state).
   */
  onChange?(batch: Batch, state: StateView): void | Promise<void>;
  /** Full state: called after each sync with the whole current state (and what changed). */
  onState?(state: StateView, batch: Batch): void | Promise<void>;
  /** Called once when the watch stops. */
  close?(): void | Promise<void>;
}

export interface WatchOptions {
  /** The node whose state to follow. */
  node: string;
  /** Logs on stderr at info level unless given (silentLogger for none). */
  log?: Logger;
  /** Minimum time between two calls of the backend, in ms (default 0). */
  minSyncPeriodMs?: number;
  /** Calls allowed back to back before the minimum period applies (default 2). */
  burst?: number;
  /** Deliver one state and stop. */
  once?: boolean;
  signal?: AbortSignal;
}

export interface StateWatch {
  /** The current state (read-only), also between calls of the backend. */
  readonly state: StateView;
  /** Resolves once the backend has been given the first complete state. */
  readonly firstSync: Promise<void>;
  /** Resolves when the watch stops (after stop(), the signal, or one sync with `once`). */
  readonly done: Promise<RunnerStats>;
  stop(): Promise<void>;
}

/** A Backend as a Sink (the contract of kpng's own sinks). */
export function backendSink(backend: Backend): Sink {
  if (!backend.onChange && !backend.onState) throw new Error('a backend needs onChange or onState (or both)');
  return {
    name: backend.name ?? 'backend',
    async apply(batch, state) {
      await backend.onChange?.(batch, state);
      await backend.onState?.(state, batch);
    },
    close: backend.close ? async () => { await backend.close!(); } : undefined,
  };
}

/** Drives a backend from any ItemStore (NodeState, or a store fed by startApiSource). */
export function watchItemStore(state: ItemStore, backend: Backend, opts: Omit<WatchOptions, 'node'> & { onStop?: () => Promise<void> | void }): StateWatch {
  const log = opts.log ?? createLogger('info');
  const sink = backendSink(backend);
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  let first!: () => void;
  const firstSync = new Promise<void>((r) => (first = r));
  const done = runSink(state, sink, {
    log,
    minSyncPeriodMs: opts.minSyncPeriodMs ?? 0,
    burst: opts.burst ?? 2,
    once: opts.once,
    onApplied: () => first(),
  }, ac.signal).finally(async () => {
    opts.signal?.removeEventListener('abort', onAbort);
    try { await sink.close?.(); } finally { await opts.onStop?.(); }
  });
  return {
    state,
    firstSync,
    done,
    async stop() {
      ac.abort();
      await done.catch(() => undefined);
    },
  };
}

/** Follows a node's state from a kpng API server (`kpng ... --to api`). */
export async function watchLocalState(opts: WatchOptions & TlsFiles & { api?: string }, backend: Backend): Promise<StateWatch> {
  const log = opts.log ?? createLogger('info');
  const ac = new AbortController();
  const src = await startApiSource({ api: opts.api ?? DEFAULT_API, node: opts.node, log, signal: ac.signal, tlsCert: opts.tlsCert, tlsKey: opts.tlsKey, tlsCA: opts.tlsCA });
  return watchItemStore(src.state, backend, { ...opts, log, onStop: async () => { ac.abort(); await src.stop(); } });
}

/** Computes a node's state from your own ClusterStore (you feed it Kubernetes objects). */
export function watchClusterState(opts: WatchOptions & { cluster: ClusterStore }, backend: Backend): StateWatch {
  const state = new NodeState(opts.cluster, opts.node);
  return watchItemStore(state, backend, { ...opts, onStop: () => state.close() });
}

/** Computes a node's state from a kubectl dump (YAML or JSON), following its changes unless `follow: false`. */
export async function watchFileState(opts: WatchOptions & { file: string; follow?: boolean; serviceProxyName?: string }, backend: Backend): Promise<StateWatch> {
  const log = opts.log ?? createLogger('info');
  const cluster = new ClusterStore({ log, serviceProxyName: opts.serviceProxyName });
  const file = new FileSource({ file: opts.file, store: cluster, log });
  await file.start(opts.follow ?? !opts.once);
  const state = new NodeState(cluster, opts.node);
  return watchItemStore(state, backend, { ...opts, log, onStop: () => { file.stop(); state.close(); } });
}

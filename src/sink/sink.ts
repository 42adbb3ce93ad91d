// The contract between the diff store and everything downstream (backends, the API
// server, debugging views). A sink receives batches of keyed Set/Delete changes that end
// with a Sync barrier: once apply() resolves, the sink has applied revision `revision`.
// The next batch is handed over only after that, so changes made meanwhile coalesce.
import type { Item } from '../model/enls';

export type Change =
  | { op: 'set'; key: string; item: Item }
  | { op: 'delete'; key: string };

export interface Batch {
  /** Revision of the ENLS this batch brings the sink to. */
  revision: number;
  /** True on the first batch (and after a resubscription): the sink must drop what it had. */
  reset: boolean;
  /** Changes in key order; a key appears at most once. */
  changes: Change[];
}

/** Read-only access to the whole current state, for sinks that prefer full state. */
export interface StateView {
  readonly node: string;
  readonly revision: number;
  get(key: string): Item | undefined;
  /** Items in key order. */
  items(): Iterable<Item>;
  readonly size: number;
}

export interface Sink {
  readonly name: string;
  /** `signal` aborts when kpng is stopping: a sink may then abandon a long apply (rejecting with the
   *  signal's reason) as long as what it already had in force stays in force. */
  apply(batch: Batch, state: StateView, signal?: AbortSignal): Promise<void>;
  /**
   * Optional: `lost` is called when what the sink applied stopped working without a change (kernel
   * state removed under it). The runner then resyncs in full; the health checker counts the state as
   * queued and not applied until a sync succeeds.
   */
  watch?(lost: (why: string) => void): void;
  close?(): Promise<void>;
}

// The contract of a kernel backend's renderer. A Dataplane turns ENLS services into kernel state; the
// shared KernelSink (kernel-sink.ts) around it decides when to do a full or an incremental sync, cleans
// stale conntrack entries, counts and logs, so every kernel backend behaves the same way.
import type { NodeInfo, Service } from '../../model/enls';

/** One service that changed: its previous and new ENLS (null when absent). */
export interface ServiceChange {
  key: string;
  old: Service | null;
  new: Service | null;
}

/** What one sync cost the kernel. */
export interface SyncReport {
  /** Netlink messages (or syscalls, for backends without netlink) sent. */
  messages: number;
  bytes: number;
  /** Time spent waiting for the kernel, ms. */
  ms: number;
  /** A dataplane made of parts (`--to ebpf`): each part's wall time, from its start to its end, ms. */
  parts?: Array<{ name: string; wallMs: number }>;
}

/**
 * Thrown by Dataplane.update() before it sends its own part, when the change cannot be made in place
 * (e.g. a fixed-capacity kernel set would overflow): the KernelSink does a full sync instead, and
 * does not count it as a failure.
 */
export class NeedsFullSync extends Error {
  override readonly name = 'NeedsFullSync';
}

export interface Dataplane {
  readonly name: string;
  /**
   * Replace everything this dataplane owns with the given state, atomically where the kernel allows
   * it. Called at start-up, after a failed sync, when the node item changes and every --sync-period.
   * Must leave the previous state in place when it fails.
   *
   * `waiting`, when given, may be called once the dataplane has done its own work and only waits for
   * the kernel (a CombinedDataplane then starts its next part, whose JavaScript overlaps that wait).
   *
   * `signal` aborts when kpng is stopping: a dataplane that renders for long may then stop before it
   * sends anything (rejecting with the signal's reason), the previous state staying in place.
   */
  fullSync(services: Service[], node: NodeInfo | undefined, revision: number, waiting?: () => void, signal?: AbortSignal): Promise<SyncReport>;
  /** Apply the changed services (the node item is unchanged since the last sync). `waiting`: as for fullSync. */
  update(changes: ServiceChange[], node: NodeInfo | undefined, revision: number, waiting?: () => void): Promise<SyncReport>;
  /**
   * Tells `lost` when the kernel state this dataplane programmed stopped working between syncs
   * (the socket LB: its cgroup was removed, which severs its links), so that a full sync is run and
   * the state counts as not applied (/healthz) until one succeeds. Called once per loss.
   */
  watch?(lost: (why: string) => void): void;
  /** Release resources; kernel state stays (a restart takes it over). */
  close?(): Promise<void>;
}

// What a scenario gets from the runner and gives back. A scenario injects its fault, ends it, and
// says when; the runner keeps the probes, the churn and /healthz going around it and measures.
import type { NodePlan } from '../cluster/plan';
import type { Cluster } from './cluster';
import type { ScaleEvent } from './explain';
import type { OutsideProbes } from './outside';
import type { ProbeEvent } from './probes';
import type { Backend, ScenarioInfo } from './scenario-list';

export interface Context {
  c: Cluster;
  backend: Backend;
  short: boolean;
  /** The node the faults aimed at one node hit (kc-node1). */
  target: NodePlan;
  nodePort: number;
  outside: OutsideProbes;
  /**
   * The marker Service moved to the other pod: when, the pod that now serves it, and when its
   * EndpointSlice said so (resolves within a minute; undefined if it did not).
   */
  flipMarker(): Promise<Flip>;
  /** The churn's scale operations so far. */
  scales(): ScaleEvent[];
  say(msg: string): void;
}

export interface Flip {
  at: number;
  pod: string;
  sliceAt: Promise<number | undefined>;
}

export interface Fault {
  /** Seconds since the epoch. */
  faultAt: number;
  recoveredAt?: number;
  /** Figures measured during the run, in words. */
  figures: string[];
  /** Figures that need the client pods' events (the marker's catch-up), computed once they are read. */
  after?: (events: ProbeEvent[], to: number) => string[] | Promise<string[]>;
  /** How long the runner keeps watching after the fault ended (default 20 s). */
  settleMs?: number;
}

export interface Scenario {
  info: ScenarioInfo;
  /** The proxy's log lines this scenario shows. */
  logPattern: RegExp;
  run(ctx: Context): Promise<Fault>;
}

/** The log lines about the API server and watches, for the scenarios that break them. */
export const API_LOG = /kube:|watch|reflector|api ?server|reconnect|refused|ECONN|EHOSTUNREACH|\b410\b|gone|expired|too old|relist|timed? ?out|unhealthy|healthz/i;

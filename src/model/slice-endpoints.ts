// A slice's endpoints stored by column: the addresses in one array, the node names in another, the
// conditions in one short string, and hints only when some endpoint carries any. An object per
// endpoint makes hundreds of thousands of objects on a large cluster, which every major GC traces
// while the event loop waits; by column a slice holds three.
import { internCodeRun, Interner } from '../util/intern';

/** One endpoint of a slice, as read from the API (a slice stores its endpoints by column: SliceEndpoints). */
export interface SliceEndpoint {
  ip: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  nodeName: string | null;
  /** Hints, or null when the endpoint carries none. */
  zoneHints: string[] | null;
  nodeHints: string[] | null;
}

/** An endpoint of one service port, target port resolved. */
export interface PortEndpoint extends SliceEndpoint {
  port: number;
}

const READY = 1, SERVING = 2, TERMINATING = 4;

/** One endpoint's hints (each list sorted, de-duplicated; null when the endpoint names none). */
export interface EndpointHints {
  zones: string[] | null;
  nodes: string[] | null;
}

/** One string per distinct run of conditions: almost every slice is all ready, so a cluster shares a handful. */
const conditionRuns = new Interner<string>(4096);

export class SliceEndpoints {
  private constructor(
    private readonly ips: readonly string[],
    /** One char per endpoint, its code the READY | SERVING | TERMINATING bits. */
    private readonly conditions: string,
    private readonly nodeNames: readonly (string | null)[],
    /** Per endpoint, or null when no endpoint of the slice has hints (the usual case). */
    private readonly hints: readonly (EndpointHints | null)[] | null,
  ) {}

  static of(eps: readonly SliceEndpoint[]): SliceEndpoints {
    const codes = eps.map((ep) => (ep.ready ? READY : 0) | (ep.serving ? SERVING : 0) | (ep.terminating ? TERMINATING : 0));
    const hinted = eps.some((ep) => ep.zoneHints !== null || ep.nodeHints !== null);
    return new SliceEndpoints(
      eps.map((ep) => ep.ip),
      internCodeRun(conditionRuns, codes),
      eps.map((ep) => ep.nodeName),
      hinted ? eps.map((ep) => (ep.zoneHints || ep.nodeHints ? { zones: ep.zoneHints, nodes: ep.nodeHints } : null)) : null,
    );
  }

  get length(): number { return this.ips.length; }
  ip(i: number): string { return this.ips[i]!; }
  nodeName(i: number): string | null { return this.nodeNames[i]!; }
  ready(i: number): boolean { return (this.conditions.charCodeAt(i) & READY) !== 0; }
  serving(i: number): boolean { return (this.conditions.charCodeAt(i) & SERVING) !== 0; }
  terminating(i: number): boolean { return (this.conditions.charCodeAt(i) & TERMINATING) !== 0; }
  zoneHints(i: number): string[] | null { return this.hints?.[i]?.zones ?? null; }
  nodeHints(i: number): string[] | null { return this.hints?.[i]?.nodes ?? null; }

  /** Endpoint i as an object (a copy: the slice keeps its columns). */
  at(i: number): SliceEndpoint {
    return {
      ip: this.ip(i), ready: this.ready(i), serving: this.serving(i), terminating: this.terminating(i),
      nodeName: this.nodeName(i), zoneHints: this.zoneHints(i), nodeHints: this.nodeHints(i),
    };
  }

  /** Endpoint i with its target port, as the model's rules read it. */
  withPort(i: number, port: number): PortEndpoint {
    return {
      ip: this.ip(i), ready: this.ready(i), serving: this.serving(i), terminating: this.terminating(i),
      nodeName: this.nodeName(i), zoneHints: this.zoneHints(i), nodeHints: this.nodeHints(i), port,
    };
  }

  toArray(): SliceEndpoint[] {
    return Array.from({ length: this.length }, (_, i) => this.at(i));
  }
}

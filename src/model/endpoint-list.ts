// An ENLS endpoint list (ServicePort.clusterEndpoints / localEndpoints) stored by column: the
// addresses in one array, the target port once when every endpoint shares it (almost always), and
// the local / terminating flags as one short shared string. An object per endpoint was, at 50k
// services x 10 endpoints, 500k objects that every major GC traced during a full sync; by column a
// list is two objects and its array's store. Reading one endpoint as an object (at(), iteration,
// map) makes a fresh one that dies young.
import { internCodeRun, Interner, orEmpty } from '../util/intern';

/** One endpoint of a service port: where packets are DNATed to. */
export interface Endpoint { ip: string; port: number; local: boolean; terminating: boolean }

const LOCAL = 1, TERMINATING = 2;

/** One string per distinct run of flags: most lists are "nothing local, nothing terminating". */
const flagRuns = new Interner<string>(4096);

export class EndpointList implements Iterable<Endpoint> {
  private constructor(
    private readonly ips: readonly string[],
    /** The port of every endpoint when they share one, else one per endpoint. */
    private readonly ports: number | readonly number[],
    /** One char per endpoint, its code the LOCAL | TERMINATING bits. */
    private readonly flags: string,
  ) {}

  /** The empty list, shared. */
  static readonly EMPTY: EndpointList = new EndpointList(orEmpty<string>([]), 0, '');

  /** A list of these endpoints, in this order (each is copied; the objects are not kept). */
  static from(eps: Iterable<Endpoint>): EndpointList {
    const ips: string[] = [], ports: number[] = [], flags: number[] = [];
    for (const e of eps) {
      ips.push(e.ip);
      ports.push(e.port);
      flags.push((e.local ? LOCAL : 0) | (e.terminating ? TERMINATING : 0));
    }
    return EndpointList.ofColumns(ips, ports, flags);
  }

  /**
   * A list from its columns (the addresses are kept, not copied: the caller gives them up). `local`
   * may be one value for every endpoint; `terminating` is (the model's fallback is per list).
   */
  static build(ips: string[], ports: readonly number[], local: readonly boolean[] | boolean, terminating: boolean): EndpointList {
    const t = terminating ? TERMINATING : 0;
    const flags = ips.map((_, i) => ((typeof local === 'boolean' ? local : local[i]) ? LOCAL : 0) | t);
    return EndpointList.ofColumns(ips, ports, flags);
  }

  private static ofColumns(ips: string[], ports: readonly number[], flags: readonly number[]): EndpointList {
    if (ips.length === 0) return EndpointList.EMPTY;
    const first = ports[0]!;
    let same = true;
    for (let i = 1; i < ports.length && same; i++) same = ports[i] === first;
    return new EndpointList(ips, same ? first : [...ports], internCodeRun(flagRuns, flags));
  }

  get length(): number { return this.ips.length; }
  /** Every endpoint's address, in order (the list's own column: read, never change it). */
  get ipColumn(): readonly string[] { return this.ips; }
  ip(i: number): string { return this.ips[i]!; }
  port(i: number): number { return typeof this.ports === 'number' ? this.ports : this.ports[i]!; }
  local(i: number): boolean { return (this.flags.charCodeAt(i) & LOCAL) !== 0; }
  terminating(i: number): boolean { return (this.flags.charCodeAt(i) & TERMINATING) !== 0; }

  /** Endpoint i as a new object; undefined past the end (negative i counts from the end, as Array's at). */
  at(i: number): Endpoint | undefined {
    const k = i < 0 ? this.length + i : i;
    if (k < 0 || k >= this.length) return undefined;
    return { ip: this.ips[k]!, port: this.port(k), local: this.local(k), terminating: this.terminating(k) };
  }

  *[Symbol.iterator](): Iterator<Endpoint> {
    for (let i = 0; i < this.length; i++) yield this.at(i)!;
  }

  toArray(): Endpoint[] {
    const out = new Array<Endpoint>(this.length);
    for (let i = 0; i < this.length; i++) out[i] = this.at(i)!;
    return out;
  }

  map<T>(fn: (e: Endpoint, i: number) => T): T[] {
    const out = new Array<T>(this.length);
    for (let i = 0; i < this.length; i++) out[i] = fn(this.at(i)!, i);
    return out;
  }

  filter(fn: (e: Endpoint, i: number) => boolean): Endpoint[] {
    const out: Endpoint[] = [];
    for (let i = 0; i < this.length; i++) {
      const e = this.at(i)!;
      if (fn(e, i)) out.push(e);
    }
    return out;
  }

  some(fn: (e: Endpoint, i: number) => boolean): boolean {
    for (let i = 0; i < this.length; i++) if (fn(this.at(i)!, i)) return true;
    return false;
  }

  /** Same endpoints in the same order. */
  equals(other: EndpointList): boolean {
    if (this === other) return true;
    if (this.flags !== other.flags || this.length !== other.length) return false;
    for (let i = 0; i < this.length; i++) if (this.ips[i] !== other.ips[i] || this.port(i) !== other.port(i)) return false;
    return true;
  }

  /** As JSON: the array of endpoint objects (dumps, hashes and logs read as they always did). */
  toJSON(): Endpoint[] {
    return this.toArray();
  }
}

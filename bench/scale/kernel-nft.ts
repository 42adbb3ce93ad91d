// Cluster-IP traffic as a node's nftables ruleset sends it, read from the kernel (`nft -j list table`)
// and worked out by following nftables' own semantics, not any proxy's naming: for every cluster IP
// and port the table knows, one new connection is walked through the table's nat prerouting and
// output base chains (rules, jumps and gotos, verdict maps, named and anonymous maps, numgen), and
// every address a DNAT can rewrite it to is collected. So the same reader serves kpng's layout
// (vips -> cls-* -> shared pick-* chains keyed by the destination in picks maps, affinity chains) and
// upstream kube-proxy's (service-ips -> service-* -> numgen map or vmap -> endpoint-* chains), and a
// wrong constant in either proxy cannot be repeated here.
//
// What a match on something a connection does not fix (source address, input interface, mark,
// affinity sets) says is unknown: both ways are followed, so the result is the union over every
// client (pods, the node, other hosts). A numgen lookup that finds no element for some of its values
// sends those connections nowhere: that is listed as the entry HOLE, so a missing slot shows up.
import { runIn, placeName, type KernelPlace } from './kernel-place';

/** A cluster-IP table entry that is no endpoint: some numgen value of a lookup has no element (those connections are not DNATed). */
export const HOLE = '!no-endpoint-for-some-numgen-values';

export type L4 = 'tcp' | 'udp' | 'sctp';
export type NftFamily = 'ip' | 'ip6';

/** One destination of cluster traffic: a new connection to daddr:port over proto. */
export interface Dest { daddr: string; proto: L4; port: number }

/** What the walk found for one destination: DNAT targets (`ip:port`, IPv6 bracketed) and whether some connections find none. */
export interface DestResult { endpoints: string[]; hole: boolean }

// nft's JSON is loosely typed; this module reads it defensively.
type J = any;

/** `nft -j list table FAMILY NAME` in place: the listing, or undefined when the table does not exist. */
export async function listTable(place: KernelPlace, family: NftFamily, table: string): Promise<J[] | undefined> {
  const r = await runIn(place, ['nft', '-j', 'list', 'table', family, table]);
  if (r.code !== 0) {
    if (/No such file or directory|does not exist/i.test(r.stderr)) return undefined;
    throw new Error(`nft -j list table ${family} ${table} in ${placeName(place)}: exit ${r.code}: ${r.stderr.trim()}`);
  }
  return (JSON.parse(r.stdout) as { nftables: J[] }).nftables;
}

// ---- Values: addresses, prefixes and ranges, as nft's JSON writes them. ----

const L4S = new Set(['tcp', 'udp', 'sctp']);
const PROTO_NUM: Record<string, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

/** One scalar as the index compares it (protocol numbers as names: a key may hold either). */
const norm = (v: unknown): string => (typeof v === 'number' ? String(v) : PROTO_NUM[v as string] ?? String(v));

function ipToBig(ip: string): bigint | undefined {
  if (ip.includes(':')) {
    let s = ip;
    const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
    if (v4) {
      const b = ipToBig(v4[1]);
      if (b === undefined) return undefined;
      s = `${s.slice(0, -v4[1].length)}${(b >> 16n).toString(16)}:${(b & 0xffffn).toString(16)}`;
    }
    const [head, tail] = s.split('::');
    const h = head ? head.split(':') : [];
    const t = tail !== undefined ? (tail ? tail.split(':') : []) : [];
    const groups = tail !== undefined ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
    if (groups.length !== 8) return undefined;
    return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g || '0', 16)), 0n);
  }
  const parts = ip.split('.');
  if (parts.length !== 4) return undefined;
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n);
}

/** Whether the scalar `v` is inside an element component (a scalar, {prefix}, {range}); undefined: cannot tell. */
function within(v: string | number, c: J): boolean | undefined {
  if (typeof c === 'string' || typeof c === 'number') return norm(v) === norm(c);
  if (c && typeof c === 'object' && 'prefix' in c) {
    const { addr, len } = c.prefix as { addr: string; len: number };
    const a = ipToBig(String(v));
    const p = ipToBig(addr);
    if (a === undefined || p === undefined || String(v).includes(':') !== addr.includes(':')) return false;
    const bits = addr.includes(':') ? 128n : 32n;
    const shift = bits - BigInt(len);
    return (a >> shift) === (p >> shift);
  }
  if (c && typeof c === 'object' && 'range' in c) {
    const [lo, hi] = c.range as [J, J];
    if (typeof v === 'number') return v >= Number(lo) && v <= Number(hi);
    const a = ipToBig(v);
    const l = ipToBig(String(lo));
    const h = ipToBig(String(hi));
    if (a === undefined || l === undefined || h === undefined) return undefined;
    return a >= l && a <= h;
  }
  return undefined;
}

/** An element's key as components (a concatenation's parts, or the one value), `elem` wrappers (timeouts, counters) removed. */
const unwrap = (e: J): J => (e && typeof e === 'object' && 'elem' in e ? e.elem.val : e);
const parts = (key: J): J[] => (key && typeof key === 'object' && 'concat' in key ? key.concat : [key]);

// ---- The table. ----

interface Elem { key: J[]; value: J }
interface Chain { rules: J[][]; type?: string; hook?: string; prio?: number }

/** A named set or map: its elements, indexed by the components a lookup fixes (built on first use). */
class NamedSet {
  private readonly indexes = new Map<string, { byKey: Map<string, Elem[]>; irregular: Elem[] }>();
  constructor(readonly elems: Elem[]) {}

  /** Elements whose components at `fixed` positions equal `values` (plus any with intervals there, checked by the caller). */
  candidates(fixed: number[], values: string[]): Elem[] {
    const mask = fixed.join(',');
    let ix = this.indexes.get(mask);
    if (!ix) {
      ix = { byKey: new Map(), irregular: [] };
      for (const e of this.elems) {
        if (fixed.some((i) => typeof e.key[i] === 'object')) { ix.irregular.push(e); continue; }
        const k = fixed.map((i) => norm(e.key[i])).join('|');
        const l = ix.byKey.get(k);
        if (l) l.push(e); else ix.byKey.set(k, [e]);
      }
      this.indexes.set(mask, ix);
    }
    const hit = ix.byKey.get(values.join('|')) ?? [];
    return ix.irregular.length ? [...hit, ...ix.irregular] : hit;
  }
}

export class NftTable {
  readonly chains = new Map<string, Chain>();
  readonly sets = new Map<string, NamedSet>();

  constructor(listing: J[]) {
    for (const o of listing) {
      if (o.chain) {
        const c = this.chain(o.chain.name);
        Object.assign(c, { type: o.chain.type, hook: o.chain.hook, prio: o.chain.prio });
      } else if (o.rule) {
        this.chain(o.rule.chain).rules.push(o.rule.expr ?? []);
      } else if (o.set || o.map) {
        const s = o.set ?? o.map;
        const isMap = !!o.map;
        const elems = ((s.elem ?? []) as J[]).map((e): Elem => (isMap ? { key: parts(unwrap(e[0])), value: e[1] } : { key: parts(unwrap(e)), value: true }));
        this.sets.set(s.name, new NamedSet(elems));
      }
    }
  }

  private chain(name: string): Chain {
    let c = this.chains.get(name);
    if (!c) this.chains.set(name, (c = { rules: [] }));
    return c;
  }

  /** Elements of a named set (by name, without @). */
  elements(name: string): Elem[] { return this.sets.get(name)?.elems ?? []; }

  /**
   * Every destination whose address is in `addrSet` and that some map or set element names as
   * (address, protocol, port, ...): the service ports the table holds for those addresses, whether
   * they DNAT or are refused.
   */
  destinations(addrSet: string): Dest[] {
    const addrs = new Set(this.elements(addrSet).map((e) => norm(e.key[0])));
    const seen = new Map<string, Dest>();
    for (const [name, s] of this.sets) {
      if (name === addrSet) continue;
      for (const e of s.elems) {
        const [a, p, port] = e.key;
        if (e.key.length < 3 || typeof a !== 'string' || !addrs.has(a) || typeof port !== 'number') continue;
        const proto = norm(p);
        if (!L4S.has(proto)) continue;
        seen.set(`${a}|${proto}|${port}`, { daddr: a, proto: proto as L4, port });
      }
    }
    return [...seen.values()];
  }

  /** The nat prerouting and output base chains, where a new connection's destination is rewritten. */
  private natBases?: string[];

  /** Where new connections to `d` are DNATed, over every nat prerouting and output base chain. */
  resolve(d: Dest): DestResult {
    const acc: Acc = { eps: new Set(), hole: false };
    this.natBases ??= [...this.chains.entries()]
      .filter(([, c]) => c.type === 'nat' && (c.hook === 'prerouting' || c.hook === 'output'))
      .sort((a, b) => (a[1].prio ?? 0) - (b[1].prio ?? 0))
      .map(([name]) => name);
    for (const name of this.natBases) new Walk(this, d, acc).chain(name, 0);
    return { endpoints: [...acc.eps].sort(), hole: acc.hole };
  }
}

// ---- The walk of one connection. ----

interface Acc { eps: Set<string>; hole: boolean }

/** How a chain ended: every path reached a final verdict (accept, drop, DNAT...), or it may return to its caller. */
type End = 'stop' | 'return';
type Tri = 'yes' | 'no' | 'maybe';

/** A key component as the connection fixes it: a value, the values of a numgen, or unknown. */
type Comp = { k: 'val'; v: string | number } | { k: 'numgen'; values: number[] } | { k: 'any' };

const bracket = (ip: string): string => (ip.includes(':') ? `[${ip}]` : ip);
// nft refuses rulesets that jump deeper than 16; more here means a loop this reader did not expect.
const MAX_DEPTH = 32;

class Walk {
  constructor(private readonly t: NftTable, private readonly d: Dest, private readonly acc: Acc) {}

  chain(name: string, depth: number): End {
    if (depth > MAX_DEPTH) throw new Error(`nft: chains nested deeper than ${MAX_DEPTH} from ${name}`);
    const c = this.t.chains.get(name);
    if (!c) return 'return';
    for (const rule of c.rules) {
      const end = this.rule(rule, depth);
      if (end) return end;
    }
    return 'return';
  }

  /** One rule: undefined when the chain goes on to its next rule. */
  private rule(stmts: J[], depth: number): End | undefined {
    let sure = true;
    for (const s of stmts) {
      if (s.match) {
        const m = this.match(s.match);
        if (m === 'no') return undefined;
        if (m === 'maybe') sure = false;
      } else if (s.jump) {
        return this.chain(s.jump.target, depth + 1) === 'stop' && sure ? 'stop' : undefined;
      } else if (s.goto) {
        const end = this.chain(s.goto.target, depth + 1);
        return sure ? end : undefined;
      } else if (s.vmap) {
        return this.vmap(s.vmap, sure, depth);
      } else if (s.dnat) {
        const certain = this.dnat(s.dnat);
        return sure && certain ? 'stop' : undefined;
      } else if ('accept' in s || 'drop' in s || 'reject' in s || 'queue' in s || 'masquerade' in s || 'snat' in s || 'redirect' in s) {
        return sure ? 'stop' : undefined;
      } else if ('return' in s) {
        return sure ? 'return' : undefined;
      }
      // counter, mangle (marks), set updates (affinity), log, limit...: no effect on where it goes.
    }
    return undefined;
  }

  /** A verdict map: each verdict it can give, followed. */
  private vmap(v: J, sure: boolean, depth: number): End | undefined {
    const hits = this.lookup(v.key, v.data);
    if (!hits) return undefined;
    const ends: Array<End | 'next'> = hits.values.map((verdict: J) => {
      if (verdict.goto) return this.chain(verdict.goto.target, depth + 1);
      if (verdict.jump) return this.chain(verdict.jump.target, depth + 1) === 'stop' ? 'stop' : 'next';
      if ('return' in verdict) return 'return';
      if ('continue' in verdict) return 'next';
      return 'stop'; // accept, drop
    });
    if (!sure || !hits.certain || ends.length === 0) return undefined;
    if (ends.every((e) => e === 'stop')) return 'stop';
    return ends.includes('next') ? undefined : 'return';
  }

  /** Collects a DNAT's targets; true when it rewrites every connection that reaches it. */
  private dnat(n: J): boolean {
    const add = (addr: J, port: J) => {
      if (typeof addr !== 'string') throw new Error(`nft: unsupported DNAT address ${JSON.stringify(addr)}`);
      const p = port === undefined ? this.d.port : port;
      if (typeof p !== 'number') throw new Error(`nft: unsupported DNAT port ${JSON.stringify(port)}`);
      this.acc.eps.add(`${bracket(addr)}:${p}`);
    };
    if (n.addr && typeof n.addr === 'object' && 'map' in n.addr) {
      const hits = this.lookup(n.addr.map.key, n.addr.map.data);
      if (!hits) return false;
      for (const v of hits.values) {
        const [addr, port] = parts(v);
        add(addr, port ?? n.port);
      }
      return hits.certain;
    }
    add(n.addr, n.port);
    return true;
  }

  /** A key expression as this connection fixes it; null when it cannot apply (a `tcp dport` on a UDP connection). */
  private comp(e: J): Comp | null {
    if (e?.payload) {
      const { protocol, field } = e.payload as { protocol: string; field: string };
      if (field === 'daddr' && (protocol === 'ip' || protocol === 'ip6')) return { k: 'val', v: this.d.daddr };
      if (field === 'dport' && (protocol === 'th' || L4S.has(protocol))) return protocol === 'th' || protocol === this.d.proto ? { k: 'val', v: this.d.port } : null;
      return { k: 'any' };
    }
    if (e?.meta?.key === 'l4proto') return { k: 'val', v: this.d.proto };
    if (e?.numgen) {
      const { mod, offset } = e.numgen as { mod: number; offset?: number };
      return { k: 'numgen', values: Array.from({ length: mod }, (_, i) => i + (offset ?? 0)) };
    }
    return { k: 'any' };
  }

  /**
   * The values a map (named "@name", or anonymous {set: [[key, value], ...]}) gives this connection.
   * certain: exactly one element applies to each connection (every component fixed or a numgen, and
   * every numgen value found); a numgen value without an element is a hole.
   */
  private lookup(keyExpr: J, data: J): { values: J[]; certain: boolean } | null {
    const comps: Comp[] = [];
    for (const e of parts(keyExpr)) {
      const c = this.comp(e);
      if (!c) return null;
      comps.push(c);
    }
    let elems: Elem[];
    if (typeof data === 'string' && data.startsWith('@')) {
      const set = this.t.sets.get(data.slice(1));
      if (!set) return { values: [], certain: false };
      const fixed: number[] = [];
      const values: string[] = [];
      comps.forEach((c, i) => { if (c.k === 'val') { fixed.push(i); values.push(norm(c.v)); } });
      elems = set.candidates(fixed, values);
    } else {
      elems = ((data?.set ?? []) as J[]).map((e): Elem => (Array.isArray(e) ? { key: parts(unwrap(e[0])), value: e[1] } : { key: parts(unwrap(e)), value: true }));
    }
    const out: J[] = [];
    const numgenHit = new Set<number>();
    let matched = false;
    for (const e of elems) {
      if (e.key.length !== comps.length) continue;
      let ok = true;
      let gen: number | undefined;
      for (let i = 0; i < comps.length && ok; i++) {
        const c = comps[i];
        if (c.k === 'val') ok = within(c.v, e.key[i]) === true;
        else if (c.k === 'numgen') { ok = typeof e.key[i] === 'number' && c.values.includes(e.key[i]); gen = e.key[i]; }
      }
      if (!ok) continue;
      matched = true;
      if (gen !== undefined) numgenHit.add(gen);
      out.push(e.value);
    }
    const numgen = comps.find((c): c is { k: 'numgen'; values: number[] } => c.k === 'numgen');
    const unknown = comps.some((c) => c.k === 'any');
    // Reached with some numgen values finding nothing: those connections go on un-DNATed.
    if (numgen && !unknown && numgen.values.some((v) => !numgenHit.has(v))) this.acc.hole = true;
    const certain = matched && !unknown && (!numgen || numgen.values.every((v) => numgenHit.has(v)));
    return { values: out, certain };
  }

  /** A match: yes, no, or maybe (it depends on what the connection does not fix). */
  private match(m: J): Tri {
    const tri = this.compare(m.left, m.right);
    if (m.op === '!=') return tri === 'yes' ? 'no' : tri === 'no' ? 'yes' : 'maybe';
    if (m.op === '==' || m.op === 'in' || m.op === undefined) return tri;
    return 'maybe';
  }

  private compare(left: J, right: J): Tri {
    // A cluster IP is no local address of the node (nodes do not hold it in nftables mode): the
    // node-port rules (`fib daddr type local ...`) never take it.
    if (left?.fib && (left.fib.flags as string[] | undefined)?.includes('daddr') && left.fib.result === 'type') {
      return right === 'local' ? 'no' : 'maybe';
    }
    // One new connection.
    if (left?.ct?.key === 'state') {
      const states = Array.isArray(right) ? right : right?.set ?? [right];
      return states.includes('new') ? 'yes' : 'no';
    }
    const c = this.comp(left);
    if (c === null) return 'no';
    if (c.k === 'any') return 'maybe';
    if (c.k === 'numgen') return typeof right === 'number' && !c.values.includes(right) ? 'no' : 'maybe';
    if (typeof right === 'string' && right.startsWith('@')) {
      const set = this.t.sets.get(right.slice(1));
      if (!set) return 'no';
      for (const e of set.candidates([0], [norm(c.v)])) {
        if (e.key.length !== 1) continue;
        const w = within(c.v, e.key[0]);
        if (w === true) return 'yes';
        if (w === undefined) return 'maybe';
      }
      return 'no';
    }
    if (right && typeof right === 'object' && 'set' in right) {
      let maybe = false;
      for (const e of right.set as J[]) {
        const w = within(c.v, unwrap(e));
        if (w === true) return 'yes';
        if (w === undefined) maybe = true;
      }
      return maybe ? 'maybe' : 'no';
    }
    const w = within(c.v, right);
    return w === undefined ? 'maybe' : w ? 'yes' : 'no';
  }
}

/** The cluster IPs of one listed table (its `clusterIpsSet`) and where each of their service ports goes. */
export function clusterIpsOfTable(listing: J[], clusterIpsSet = 'cluster-ips'): { addrs: string[]; dests: Array<{ dest: Dest; result: DestResult }> } {
  const t = new NftTable(listing);
  const addrs = t.elements(clusterIpsSet).map((e) => String(e.key[0]));
  return { addrs, dests: t.destinations(clusterIpsSet).map((dest) => ({ dest, result: t.resolve(dest) })) };
}

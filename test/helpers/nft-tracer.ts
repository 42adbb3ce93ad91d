// A packet tracer over the in-memory nftables tables of src/backend/nft/fake.ts (tests only).
//
// It sends a virtual packet through the base chains in hook and priority order and reports where it
// goes: every endpoint it may be DNATed to (all branches of a random choice are followed), DROP,
// REJECT or ACCEPT (untouched), and whether it is masqueraded. The idea follows upstream kube-proxy's
// pkg/proxy/nftables/helpers_test.go over knftables' fake. The fake is checked against the kernel:
// test/e2e/nft-tracer-vs-kernel.test.ts lists what the addon put in the kernel for the same plan, reads
// it back (nft-lift.ts) and compares it with the fake's tables (nft-compare.ts).
import { canon, famOfAddr, inCidr, type FakeNft, type FakeTable } from '../../src/backend/nft/fake';
import { stmtText } from '../../src/backend/nft/text';
import { MASQ_BIT, type Elem, type IpFamily, type L4, type Stmt } from '../../src/backend/nft/types';

export class TraceError extends Error {}

const isLoopback = (a: string): boolean => (famOfAddr(a) === 'ip' ? inCidr(a, '127.0.0.0/8') : canon(a) === canon('::1'));
const hostPort = (a: string, port: number): string => (a.includes(':') ? `[${a}]:${port}` : `${a}:${port}`);

export interface Packet {
  src: string;
  dst: string;
  dport: number;
  /** Default tcp. */
  proto?: L4;
  /** Default: from the destination address. */
  family?: IpFamily;
  /** `fib saddr type local`; default: the source is one of the tracer's local addresses. Also picks the path (output vs prerouting). */
  srcIsLocal?: boolean;
  /** `fib daddr type local` for the original destination; default: one of the tracer's local addresses. */
  dstIsLocal?: boolean;
  /** First packet of a connection (default true): NAT chains and `ct state new` rules see only those. */
  ctNew?: boolean;
  /** `meta iifname`: the interface the packet arrived on; default '' (none: a locally generated packet, or unknown). */
  iif?: string;
}

export type Verdict = 'DNAT' | 'DROP' | 'REJECT' | 'ACCEPT';

export interface Leaf {
  verdict: Verdict;
  /** "ip:port" for DNAT. */
  endpoint?: string;
  masqueraded: boolean;
  /** Rules that matched, "chain: rule", in order. */
  rules: string[];
  /** Affinity set updates this path performs. */
  updates: Array<{ set: string; addr: string }>;
}

export interface TraceResult {
  verdict: Verdict;
  /** Every endpoint the packet may be DNATed to (sorted), empty unless DNAT. */
  endpoints: string[];
  /** 'mixed' when some paths masquerade and others do not (e.g. hairpin to one of several endpoints). */
  masqueraded: boolean | 'mixed';
  leaves: Leaf[];
}

interface St {
  saddr: string; daddr: string; dport: number; proto: L4; ctNew: boolean;
  mark: number; dnat: string | null; masq: boolean;
  rules: string[]; updates: Array<{ set: string; addr: string }>;
}

type End = 'accept' | 'drop' | 'reject';
interface Out { st: St; end: End }
type Step =
  | { k: 'next'; st: St }
  | { k: 'jump' | 'goto'; chain: string; st: St }
  | { k: 'return'; st: St }
  | { k: 'end'; end: End; st: St };

type Hook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

export interface TracerOptions {
  /** The node's local addresses (`fib ... type local`); loopback is always local. */
  localAddrs: string[];
}

export class Tracer {
  private readonly local: Set<string>;

  constructor(readonly nft: FakeNft, opts: TracerOptions) {
    this.local = new Set(opts.localAddrs.map(canon));
  }

  isLocal(addr: string): boolean {
    return isLoopback(addr) || this.local.has(canon(addr));
  }

  /**
   * Where packet `p` goes. With `choose` (an endpoint "ip:port"), the affinity updates of the path
   * that reaches it are applied, as if that connection had been made.
   */
  trace(p: Packet, choose?: string): TraceResult {
    const fam = p.family ?? famOfAddr(p.dst);
    const t = this.nft.tables[fam];
    if (famOfAddr(p.src) !== fam || famOfAddr(p.dst) !== fam) throw new TraceError(`packet ${p.src} -> ${p.dst} is not of family ${fam}`);
    const st0: St = {
      saddr: p.src, daddr: p.dst, dport: p.dport, proto: p.proto ?? 'tcp', ctNew: p.ctNew ?? true,
      mark: 0, dnat: null, masq: false, rules: [], updates: [],
    };
    const srcLocal = p.srcIsLocal ?? this.isLocal(p.src);
    const dstLocal = (st: St): boolean => (st.dnat === null ? p.dstIsLocal ?? this.isLocal(p.dst) : this.isLocal(st.daddr));
    // A locally generated packet has no incoming interface (nft's iifname is all NULs then).
    const ctx: Ctx = { t, fam, srcLocal, iif: srcLocal ? '' : p.iif ?? '', dstLocal, isLocal: (a) => this.isLocal(a), now: this.nft.now, steps: 0 };

    let outs: Out[];
    if (!srcLocal) {
      // From a pod of this node or from elsewhere: prerouting, routing, input or forward, postrouting.
      outs = runHook(ctx, 'prerouting', [st0], true);
      outs = outs.flatMap((o) => {
        if (o.end !== 'accept') return [o];
        if (dstLocal(o.st)) return runHook(ctx, 'input', [o.st], true);
        return runHook(ctx, 'forward', [o.st], true).flatMap((f) => (f.end !== 'accept' ? [f] : runHook(ctx, 'postrouting', [f.st], true)));
      });
    } else {
      // From the node itself: output, postrouting; to a local address it comes back through lo
      // (prerouting without NAT, which conntrack has already bound, then input).
      outs = runHook(ctx, 'output', [st0], true);
      outs = outs.flatMap((o) => (o.end !== 'accept' ? [o] : runHook(ctx, 'postrouting', [o.st], true)));
      outs = outs.flatMap((o) => {
        if (o.end !== 'accept' || !dstLocal(o.st)) return [o];
        const again = runHook(ctx, 'prerouting', [o.st], false);
        return again.flatMap((a) => (a.end !== 'accept' ? [a] : runHook(ctx, 'input', [a.st], false)));
      });
    }

    const leaves: Leaf[] = outs.map((o) => ({
      verdict: o.end === 'drop' ? 'DROP' : o.end === 'reject' ? 'REJECT' : o.st.dnat ? 'DNAT' : 'ACCEPT',
      ...(o.end === 'accept' && o.st.dnat ? { endpoint: o.st.dnat } : {}),
      masqueraded: o.st.masq,
      rules: o.st.rules,
      updates: o.st.updates,
    }));
    const verdicts = [...new Set(leaves.map((l) => l.verdict))];
    if (verdicts.length !== 1) throw new TraceError(`paths disagree (${verdicts.join(', ')}):\n${explainLeaves(leaves)}`);
    const masqs = new Set(leaves.map((l) => l.masqueraded));
    const result: TraceResult = {
      verdict: verdicts[0],
      endpoints: [...new Set(leaves.flatMap((l) => (l.endpoint ? [l.endpoint] : [])))].sort(),
      masqueraded: masqs.size === 1 ? [...masqs][0] : 'mixed',
      leaves,
    };
    if (choose !== undefined) {
      const leaf = leaves.find((l) => l.endpoint === choose);
      if (!leaf) throw new TraceError(`no path reaches ${choose}:\n${explainLeaves(leaves)}`);
      for (const u of leaf.updates) {
        const set = t.sets.get(u.set)!;
        set.dynamic.set(canon(u.addr), this.nft.now + (set.spec.timeoutSec ?? 0));
      }
    }
    return result;
  }
}

export function explainLeaves(leaves: Leaf[]): string {
  return leaves.map((l, i) => `path ${i + 1}: ${l.verdict}${l.endpoint ? ` ${l.endpoint}` : ''}${l.masqueraded ? ' (masqueraded)' : ''}\n  ${l.rules.join('\n  ')}`).join('\n');
}

interface Ctx {
  t: FakeTable; fam: IpFamily; srcLocal: boolean; iif: string;
  dstLocal: (st: St) => boolean; isLocal: (a: string) => boolean;
  now: number; steps: number;
}

/** Every base chain of `hook`, by priority; NAT chains only for new connections not yet bound. */
function runHook(ctx: Ctx, hook: Hook, sts: St[], natAllowed: boolean): Out[] {
  const chains = [...ctx.t.chains].filter(([, c]) => c.spec.hook?.hook === hook).sort((a, b) => a[1].spec.hook!.priority - b[1].spec.hook!.priority);
  let outs: Out[] = sts.map((st) => ({ st, end: 'accept' }));
  for (const [name, c] of chains) {
    if (c.spec.hook!.type === 'nat' && !natAllowed) continue;
    outs = outs.flatMap((o) => {
      if (o.end !== 'accept') return [o];
      if (c.spec.hook!.type === 'nat' && !o.st.ctNew) return [o];
      return evalFrom(ctx, name, 0, [], o.st);
    });
  }
  return outs;
}

const clone = (st: St, rule?: string): St => ({ ...st, rules: rule ? [...st.rules, rule] : [...st.rules], updates: [...st.updates] });

function evalFrom(ctx: Ctx, chain: string, idx: number, stack: Array<{ chain: string; idx: number }>, st: St): Out[] {
  const c = ctx.t.chains.get(chain);
  if (!c) throw new TraceError(`chain ${chain} does not exist`);
  if (stack.length > 16) throw new TraceError(`jump stack too deep at ${chain}`);
  for (let i = idx; i < c.rules.length; i++) {
    if (++ctx.steps > 100000) throw new TraceError('trace does not terminate');
    const steps = evalRule(ctx, chain, c.rules[i], st);
    if (steps.length === 1 && steps[0].k === 'next') { st = steps[0].st; continue; }
    const outs: Out[] = [];
    for (const s of steps) {
      switch (s.k) {
        case 'next': outs.push(...evalFrom(ctx, chain, i + 1, stack, s.st)); break;
        case 'jump': outs.push(...evalFrom(ctx, s.chain, 0, [...stack, { chain, idx: i + 1 }], s.st)); break;
        case 'goto': outs.push(...evalFrom(ctx, s.chain, 0, stack, s.st)); break;
        case 'return': outs.push(...returnTo(ctx, stack, s.st)); break;
        case 'end': outs.push({ st: s.st, end: s.end }); break;
      }
    }
    return outs;
  }
  return returnTo(ctx, stack, st);
}

/** End of a chain or `return`: back to the last jump, or the base chain's policy (accept). */
function returnTo(ctx: Ctx, stack: Array<{ chain: string; idx: number }>, st: St): Out[] {
  if (stack.length === 0) return [{ st, end: 'accept' }];
  const top = stack[stack.length - 1];
  return evalFrom(ctx, top.chain, top.idx, stack.slice(0, -1), st);
}

function lookup(ctx: Ctx, set: string, key: string): Elem | undefined {
  const s = ctx.t.sets.get(set);
  if (!s) throw new TraceError(`set ${set} does not exist`);
  return s.elems.get(key);
}

/** nft's iifname test: the whole name, or (a "PREFIX*" pattern) its first bytes. */
const iifMatches = (iif: string, name: string, prefix: boolean): boolean => (prefix ? iif.startsWith(name) : iif === name);

function verdictStep(v: 'drop' | { goto: string }, st: St): Step {
  return v === 'drop' ? { k: 'end', end: 'drop', st } : { k: 'goto', chain: v.goto, st };
}

function evalRule(ctx: Ctx, chain: string, r: Stmt, st0: St): Step[] {
  const text = `${chain}: ${stmtText(ctx.fam, r)}`;
  const next: Step = { k: 'next', st: st0 };
  const hit = (): St => clone(st0, text);
  const ctNewOk = (want?: boolean): boolean => !want || st0.ctNew;
  switch (r.type) {
    case 'vmapVip': {
      if (!ctNewOk(r.ctNew)) return [next];
      const e = lookup(ctx, r.map, `${canon(st0.daddr)}|${st0.proto}|${st0.dport}`);
      return e && e.type === 'vip' ? [verdictStep(e.verdict, hit())] : [next];
    }
    case 'vmapPort': {
      if (!ctNewOk(r.ctNew)) return [next];
      if (r.local && !ctx.dstLocal(st0)) return [next];
      if (r.daddrCidr && !inCidr(st0.daddr, r.daddrCidr)) return [next];
      if (r.local && (!r.daddrCidr || r.exceptLoopback) && isLoopback(st0.daddr)) return [next];
      const e = lookup(ctx, r.map, `${st0.proto}|${st0.dport}`);
      return e && e.type === 'port' ? [verdictStep(e.verdict, hit())] : [next];
    }
    case 'jump': return [{ k: 'jump', chain: r.chain, st: hit() }];
    case 'goto': return [{ k: 'goto', chain: r.chain, st: hit() }];
    case 'iifReturn':
      return iifMatches(ctx.iif, r.iifname, r.prefix) ? [{ k: 'return', st: hit() }] : [next];
    case 'srcCidr':
      if (!inCidr(st0.saddr, r.cidr)) return [next];
      return [r.then === 'return' ? { k: 'return', st: hit() } : { k: 'goto', chain: r.then.goto, st: hit() }];
    case 'classGoto': {
      const match = r.from === 'any' ? true : r.from === 'local' ? ctx.srcLocal
        : 'cidr' in r.from ? inCidr(st0.saddr, r.from.cidr) : iifMatches(ctx.iif, r.from.iifname, r.from.prefix);
      if (!match) return [next];
      const st = hit();
      if (r.masq) st.mark |= MASQ_BIT;
      return [{ k: 'goto', chain: r.chain, st }];
    }
    case 'rejectDaddrInSet':
      if (!st0.ctNew || !lookup(ctx, r.set, canon(st0.daddr))) return [next];
      return [{ k: 'end', end: 'reject', st: hit() }];
    case 'dnatPick': {
      if (st0.proto !== r.proto) return [next];
      const dest = r.key === 'vip' ? `${canon(st0.daddr)}|${st0.proto}|${st0.dport}` : `${st0.proto}|${st0.dport}`;
      const steps: Step[] = [];
      for (let i = 0; i < r.n; i++) {
        const e = lookup(ctx, r.map, `${dest}|${i}`);
        // In the kernel a missing element makes the rule not match for that random value: a hole.
        if (!e || e.type !== 'pick') throw new TraceError(`${text}: slot ${i} of ${dest} missing in ${r.map}`);
        steps.push(dnatTo(hit(), e.epAddr, e.epPort));
      }
      return steps;
    }
    case 'dnat':
      if (st0.proto !== r.proto) return [next];
      return [dnatTo(hit(), r.addr, r.port)];
    case 'affinityGoto': {
      const set = ctx.t.sets.get(r.set)!;
      const exp = set.dynamic.get(canon(st0.saddr));
      const member = (exp !== undefined && exp > ctx.now) || set.elems.has(canon(st0.saddr));
      return member ? [{ k: 'goto', chain: r.chain, st: hit() }] : [next];
    }
    case 'randomGoto':
      return r.mod <= 1 ? [{ k: 'goto', chain: r.chain, st: hit() }] : [{ k: 'goto', chain: r.chain, st: hit() }, next];
    case 'affinityUpdate': {
      const st = hit();
      st.updates.push({ set: r.set, addr: st0.saddr });
      return [{ k: 'next', st }];
    }
    case 'drop': return [{ k: 'end', end: 'drop', st: hit() }];
    case 'rejectTcp': return st0.proto === 'tcp' ? [{ k: 'end', end: 'reject', st: hit() }] : [next];
    case 'rejectIcmp': return [{ k: 'end', end: 'reject', st: hit() }];
    case 'hairpinMasq': {
      if (!st0.dnat || canon(st0.saddr) !== canon(st0.daddr) || !lookup(ctx, 'hairpin', `${canon(st0.saddr)}|${canon(st0.daddr)}`)) return [next];
      const st = hit();
      st.masq = true;
      return [{ k: 'end', end: 'accept', st }];
    }
    case 'localnetMasq': {
      if (!st0.dnat || !inCidr(st0.saddr, '127.0.0.0/8')) return [next];
      const st = hit();
      st.masq = true;
      return [{ k: 'end', end: 'accept', st }];
    }
    case 'dropLocalnet':
      // Tracked packets (not new) and DNATed ones pass, as with ct state established,related / ct status dnat.
      if (!inCidr(st0.daddr, '127.0.0.0/8') || inCidr(st0.saddr, '127.0.0.0/8') || !st0.ctNew || st0.dnat) return [next];
      return [{ k: 'end', end: 'drop', st: hit() }];
    case 'returnIfNoMark': return (st0.mark & MASQ_BIT) === 0 ? [{ k: 'return', st: hit() }] : [next];
    case 'clearMark': { const st = hit(); st.mark ^= MASQ_BIT; return [{ k: 'next', st }]; }
    case 'masquerade': { const st = hit(); st.masq = true; return [{ k: 'end', end: 'accept', st }]; }
    // Offloading changes where later packets of the connection are handled, not their fate.
    case 'flowOffload': return [next];
  }
}

function dnatTo(st: St, addr: string, port: number): Step {
  st.dnat = hostPort(addr, port);
  st.daddr = addr;
  st.dport = port;
  return { k: 'end', end: 'accept', st };
}

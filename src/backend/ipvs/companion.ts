// The nftables companion of the IPVS dataplane: what IPVS cannot express, in one table per family
// ("kpng-ipvs" in ip and ip6), programmed through the addon's nftables transport in one atomic batch
// per sync. Hooks run before IPVS (LOCAL_IN at priority 98, LOCAL_OUT at -98), for new connections:
//
//   input/output (filter, -110): ip daddr . l4proto . dport vmap @dests   -> per-class chain or accept
//                                ip daddr @service-ips: reject            (a port the service does not serve)
//   class chain "cls-<pod>-<node>-<other>": pods (source CIDRs, or iifname NAME / "PREFIX*": NodeInfo's pod
//     sources), then `fib saddr type local`, then anyone else; each
//     passes (accept), masquerades (conntrack mark bit), sets the mark of a mark-keyed virtual server,
//     drops or rejects (TCP reset / ICMP port unreachable). One chain per combination, shared.
//   firewall chain "fw-<hash>-<class chain>": allowed source ranges go on to the class chain, the rest drop.
//   postrouting (nat, srcnat): hairpin (saddr . daddr both the endpoint) and marked connections masquerade.
//
// Masquerade uses the conntrack mark (bit 0x4000) rather than the packet mark, so the packet mark stays
// free for IPVS' firewall-mark lookup, which compares the whole mark.
import * as crypto from 'node:crypto';
import type { PodSource } from '../../model/enls';
import {
  IPPROTO, NFT_REG_1, NFT_REG_2, NFT_REG32, concat, ipAddr, port as portBytes, proto as protoByte,
  type NftElement, type NftExpr, type NftOp,
} from '../../native/nft-types';
import { addrType, expr, regAfterAddr } from '../../native/nft-expr';
import type { IpvsProtocol } from '../../native/ipvs';
import { CLASSES, actionName, type Action, type ClassActions, type DestPlan, type IpFamily } from './plan';

export const MASQ_CT_BIT = 0x4000;

const NAMES = { dests: 'dests', serviceIPs: 'service-ips', hairpin: 'hairpin', input: 'input', output: 'output', post: 'postrouting' } as const;

type Rule = NftExpr[];

/** The rules that carry out one action after `match`. */
function actionRules(f: IpFamily, match: Rule, a: Action): Rule[] {
  if (a.kind === 'drop') return [[...match, expr.drop()]];
  if (a.kind === 'reject') return [[...match, ...expr.protoIs(IPPROTO.tcp), expr.tcpReset()], [...match, expr.rejectPortUnreachable(f)]];
  const out: Rule = [...match];
  if (a.masq) out.push(...expr.setCtMarkBits(MASQ_CT_BIT));
  if (a.fwmark !== undefined) out.push(...expr.setMetaMark(a.fwmark));
  out.push(expr.accept());
  return [out];
}

/** The match of one pod source: its source CIDR, or the interface the packet came in on. */
const podMatch = (f: IpFamily, s: PodSource): Rule => ('cidr' in s ? expr.cidrMatch(expr.saddr(f), s.cidr) : expr.iifnameMatch(s.iifname, s.prefix));

/**
 * The class chain's name and rules for one combination of actions. The name does not say how pods
 * are recognised: that is the same for the whole table, which is rebuilt when it changes.
 */
export function classChain(f: IpFamily, actions: ClassActions, pods: PodSource[]): { name: string; rules: Rule[] } {
  const name = `cls-${CLASSES.map((c) => actionName(actions[c])).join('-')}`;
  const rules: Rule[] = [];
  const same = (c: 'pod' | 'node') => actionName(actions[c]) === actionName(actions.other);
  if (!same('pod')) for (const from of pods) rules.push(...actionRules(f, podMatch(f, from), actions.pod));
  if (!same('node')) rules.push(...actionRules(f, expr.fibLocal('saddr'), actions.node));
  rules.push(...actionRules(f, [], actions.other));
  return { name, rules };
}

function firewallChain(f: IpFamily, allowed: string[], next: string): { name: string; rules: Rule[] } {
  const sorted = [...allowed].sort();
  const h = crypto.createHash('sha1').update(sorted.join(',')).digest('hex').slice(0, 8);
  return { name: `fw-${h}-${next}`, rules: [...sorted.map((c) => [...expr.cidrMatch(expr.saddr(f), c), expr.goto(next)]), [expr.drop()]] };
}

const protoNum = (p: IpvsProtocol) => IPPROTO[p];
export const destKey = (d: { addr: string; proto: IpvsProtocol; port: number }): string => `${d.addr}|${d.proto}|${d.port}`;

interface DestEntry { addr: string; proto: IpvsProtocol; port: number; verdict: string | 'accept' }

/**
 * One family's companion table: the desired content, the content the kernel has, and the ops between
 * them. Chains are reference-counted by the destinations that use them.
 */
export class CompanionTable {
  private dests = new Map<string, DestEntry>();
  private addrs = new Map<string, number>();
  private hairpin = new Map<string, number>();
  private chains = new Map<string, { rules: Rule[]; refs: number }>();
  // As the kernel has them (after the last successful apply).
  private kDests = new Map<string, DestEntry>();
  private kAddrs = new Set<string>();
  private kHairpin = new Set<string>();
  private kChains = new Map<string, Rule[]>();
  private touched = { dests: new Set<string>(), addrs: new Set<string>(), hairpin: new Set<string>() };

  constructor(readonly fam: IpFamily, readonly table: string, private pods: PodSource[]) {}

  private ref(name: string, rules: Rule[]): void {
    const c = this.chains.get(name);
    if (c) c.refs++; else this.chains.set(name, { rules, refs: 1 });
  }

  private unref(name: string): void {
    const c = this.chains.get(name);
    if (c && --c.refs <= 0) this.chains.delete(name);
  }

  private release(e: DestEntry | undefined): void {
    if (!e || e.verdict === 'accept') return;
    this.unref(e.verdict);
    if (e.verdict.startsWith('fw-')) this.unref(e.verdict.slice(e.verdict.indexOf('-', 3) + 1));
  }

  /** Sets (or with null removes) what happens at one destination. */
  setDest(key: string, d: DestPlan | null): void {
    this.release(this.dests.get(key));
    this.touched.dests.add(key);
    if (!d) { this.dests.delete(key); return; }
    let v = 'accept';
    if (CLASSES.some((c) => actionName(d.actions[c]) !== 'pass')) {
      const cls = classChain(this.fam, d.actions, this.pods);
      this.ref(cls.name, cls.rules);
      v = cls.name;
    }
    if (d.allowed) {
      if (v === 'accept') { const cls = classChain(this.fam, d.actions, this.pods); this.ref(cls.name, cls.rules); v = cls.name; }
      const fw = firewallChain(this.fam, d.allowed, v);
      this.ref(fw.name, fw.rules);
      v = fw.name;
    }
    this.dests.set(key, { addr: d.addr, proto: d.proto, port: d.port, verdict: v });
  }

  /** Service addresses (reject on ports they do not serve) and hairpin endpoints, reference-counted. */
  refAddr(addr: string, delta: number): void { bump(this.addrs, addr, delta); this.touched.addrs.add(addr); }
  refHairpin(ip: string, delta: number): void { bump(this.hairpin, ip, delta); this.touched.hairpin.add(ip); }

  get pending(): boolean { return this.touched.dests.size + this.touched.addrs.size + this.touched.hairpin.size > 0; }

  private destElem(e: DestEntry): NftElement {
    return { key: concat(ipAddr(e.addr), protoByte(protoNum(e.proto)), portBytes(e.port)), verdict: e.verdict === 'accept' ? 'accept' : { goto: e.verdict } };
  }

  /** Ops that replace the whole table (start-up, resync, after a failure): one transaction, no gap. */
  fullOps(pods: PodSource[]): NftOp[] {
    this.pods = pods;
    const f = this.fam, t = { family: f, table: this.table };
    const a = addrType(f);
    const ops: NftOp[] = [
      { op: 'add', table: { family: f, name: this.table } },
      { op: 'delete', table: { family: f, name: this.table } },
      { op: 'add', table: { family: f, name: this.table, comment: 'kpng: what IPVS cannot express' } },
      { op: 'add', set: { ...t, name: NAMES.dests, keyType: [a, 'inet_proto', 'inet_service'], dataType: 'verdict' } },
      { op: 'add', set: { ...t, name: NAMES.serviceIPs, keyType: a } },
      { op: 'add', set: { ...t, name: NAMES.hairpin, keyType: [a, a] } },
    ];
    for (const [name] of this.chains) ops.push({ op: 'add', chain: { ...t, name } });
    for (const [name, c] of this.chains) for (const exprs of c.rules) ops.push({ op: 'add', rule: { ...t, chain: name, exprs } });
    const lookup: Rule = [...expr.ctNew(), expr.daddr(f), expr.l4proto(regAfterAddr(f)), expr.thDport(regAfterAddr(f, 1)), expr.vmap(NFT_REG_1, NAMES.dests)];
    const unserved: Rule = [...expr.ctNew(), expr.daddr(f), expr.inSet(NFT_REG_1, NAMES.serviceIPs)];
    for (const [name, hook] of [[NAMES.input, 'input'], [NAMES.output, 'output']] as const) {
      ops.push({ op: 'add', chain: { ...t, name, hook, type: 'filter', priority: -110, policy: 'accept' } });
      ops.push({ op: 'add', rule: { ...t, chain: name, exprs: lookup } });
      for (const r of actionRules(f, unserved, { kind: 'reject', masq: false })) ops.push({ op: 'add', rule: { ...t, chain: name, exprs: r } });
    }
    ops.push({ op: 'add', chain: { ...t, name: NAMES.post, hook: 'postrouting', type: 'nat', priority: 100, policy: 'accept' } });
    const hairpin = [expr.saddr(f), expr.daddr(f, f === 'ip' ? NFT_REG32(1) : NFT_REG_2), expr.inSet(NFT_REG_1, NAMES.hairpin), expr.masquerade(true)];
    ops.push({ op: 'add', rule: { ...t, chain: NAMES.post, exprs: hairpin } });
    ops.push({ op: 'add', rule: { ...t, chain: NAMES.post, exprs: [...expr.hasCtMark(MASQ_CT_BIT), expr.masquerade(true)] } });
    const elems = (set: string, list: NftElement[]) => { for (let i = 0; i < list.length; i += 1000) ops.push({ op: 'add', elements: { ...t, set, elements: list.slice(i, i + 1000) } }); };
    elems(NAMES.dests, [...this.dests.values()].map((e) => this.destElem(e)));
    elems(NAMES.serviceIPs, [...this.addrs.keys()].map((x) => ({ key: ipAddr(x) })));
    elems(NAMES.hairpin, [...this.hairpin.keys()].map((x) => ({ key: concat(ipAddr(x), ipAddr(x)) })));
    return ops;
  }

  /** Ops for what changed since the last apply: new chains, element changes, then unused chains. */
  diffOps(): NftOp[] {
    const f = this.fam, t = { family: f, table: this.table };
    const ops: NftOp[] = [];
    for (const [name, c] of this.chains) {
      if (this.kChains.has(name)) continue;
      ops.push({ op: 'add', chain: { ...t, name } });
      for (const exprs of c.rules) ops.push({ op: 'add', rule: { ...t, chain: name, exprs } });
    }
    const del: NftElement[] = [], add: NftElement[] = [];
    for (const k of this.touched.dests) {
      const was = this.kDests.get(k), now = this.dests.get(k);
      if (was && now && was.verdict === now.verdict) continue;
      if (was) del.push(this.destElem(was));
      if (now) add.push(this.destElem(now));
    }
    const setDiff = (touched: Set<string>, want: Map<string, number>, have: Set<string>, key: (x: string) => Uint8Array, set: string) => {
      const d: NftElement[] = [], a: NftElement[] = [];
      for (const x of touched) {
        if (want.has(x) && !have.has(x)) a.push({ key: key(x) });
        if (!want.has(x) && have.has(x)) d.push({ key: key(x) });
      }
      if (d.length) ops.push({ op: 'delete', elements: { ...t, set, elements: d } });
      if (a.length) ops.push({ op: 'add', elements: { ...t, set, elements: a } });
    };
    if (del.length) ops.push({ op: 'delete', elements: { ...t, set: NAMES.dests, elements: del } });
    if (add.length) ops.push({ op: 'add', elements: { ...t, set: NAMES.dests, elements: add } });
    setDiff(this.touched.addrs, this.addrs, this.kAddrs, (x) => ipAddr(x), NAMES.serviceIPs);
    setDiff(this.touched.hairpin, this.hairpin, this.kHairpin, (x) => concat(ipAddr(x), ipAddr(x)), NAMES.hairpin);
    // Firewall chains first: they jump to class chains, which can only go once unreferenced.
    const gone = [...this.kChains.keys()].filter((n) => !this.chains.has(n)).sort((a, b) => Number(b.startsWith('fw-')) - Number(a.startsWith('fw-')));
    for (const name of gone) {
      ops.push({ op: 'flush', chain: { ...t, name } });
      ops.push({ op: 'delete', chain: { ...t, name } });
    }
    return ops;
  }

  /** The kernel now has the desired content (after a successful apply of fullOps, or of diffOps). */
  committed(full: boolean): void {
    if (full) {
      this.kDests = new Map(this.dests);
      this.kAddrs = new Set(this.addrs.keys());
      this.kHairpin = new Set(this.hairpin.keys());
    } else {
      for (const k of this.touched.dests) { const d = this.dests.get(k); if (d) this.kDests.set(k, d); else this.kDests.delete(k); }
      for (const a of this.touched.addrs) { if (this.addrs.has(a)) this.kAddrs.add(a); else this.kAddrs.delete(a); }
      for (const h of this.touched.hairpin) { if (this.hairpin.has(h)) this.kHairpin.add(h); else this.kHairpin.delete(h); }
    }
    this.kChains = new Map([...this.chains].map(([n, c]) => [n, c.rules]));
    this.touched = { dests: new Set(), addrs: new Set(), hairpin: new Set() };
  }

  /** Forget everything (before a full sync rebuilds the desired content). */
  reset(pods: PodSource[]): void {
    this.pods = pods;
    this.dests.clear(); this.addrs.clear(); this.hairpin.clear(); this.chains.clear();
    this.touched = { dests: new Set(), addrs: new Set(), hairpin: new Set() };
  }
}

function bump(m: Map<string, number>, k: string, d: number): void {
  const n = (m.get(k) ?? 0) + d;
  if (n > 0) m.set(k, n); else m.delete(k);
}

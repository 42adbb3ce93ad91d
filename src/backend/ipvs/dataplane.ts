// The IPVS Dataplane: virtual servers and real servers over generic netlink, service addresses on a
// dummy link (kube-ipvs0) over rtnetlink, and the nftables companion table (companion.ts) for what IPVS
// cannot express. Wrapped by the shared KernelSink (full / incremental syncs, UDP conntrack clean-up).
//
// IPVS has no transactions, so each sync orders its messages so that traffic keeps flowing:
//   1. IPVS: new virtual servers, changed settings, new real servers (and drained ones brought back)
//   2. new addresses on kube-ipvs0 (a virtual server is in place before its address attracts traffic)
//   3. the companion table, one atomic nftables batch (both families)
//   4. addresses no longer used
//   5. IPVS: removed real servers drained (weight 0; deleted once their connections are gone, the way
//      kube-proxy does it: TCP and SCTP; UDP ones at once, stale flows are cleaned by conntrack), removed
//      virtual servers deleted.
// A full sync reconciles against dumps of the kernel's IPVS state and kube-ipvs0's addresses instead of
// starting from nothing, so a restart keeps every established connection. A failed step makes the
// KernelSink's next sync a full one, which repairs whatever the partial sync left. Virtual servers no
// service asks for are deleted, except inside --ipvs-exclude-cidrs (settings.ts), which kpng leaves alone.
import { pushAll } from '../../util/push-all';
import { IPFamily, podSources, serviceKey, type NodeInfo, type Service } from '../../model/enls';
import type { NativeCallOptions, NftOp } from '../../native';
import { nativeTransport, type NftTransport } from '../../nft/transport';
import {
  ipvsApply, ipvsDump, ipvsDumpDests, ipvsInfo, ipvsDestId, ipvsServiceId,
  type IpvsApplyResult, type IpvsOp, type IpvsService, type IpvsServiceInfo, type IpvsServiceKey,
} from '../../native/ipvs';
import { applyAddrs, ensureLink, listAddrs, type AddrApplyResult, type AddrInfo, type AddrOp, type LinkInfo } from '../../native/rtnl';
import type { Dataplane, ServiceChange, SyncReport } from '../kernel/dataplane';
import { CompanionTable, destKey } from './companion';
import { applyIpvsKernelSettings } from './kernel-settings';
import { nodePortAddrs, planService, type IpFamily, type ServicePlan, type VirtualPlan } from './plan';
import { isExcluded, type IpvsSettings } from './settings';

export interface IpvsOptions {
  /** Scheduler of every virtual server (--ipvs-scheduler). */
  scheduler: string;
  /** Dummy link holding the service addresses. */
  interface: string;
  /** Companion nftables table name (both families). */
  table: string;
  /** How often draining real servers are checked for remaining connections, ms. */
  drainCheckMs: number;
  /** --ipvs-strict-arp, --ipvs-*-timeout, --ipvs-exclude-cidrs (settings.ts). Absent: none of them. */
  settings?: IpvsSettings;
  netns?: string;
  log: (msg: string) => void;
  /**
   * Where the companion table's ops and the IPVS messages go. Default: the addon directly (one nftables
   * transaction; one IPVS batch). --aggregator: the node's aggregator, as producer "kpng".
   */
  paths?: IpvsPaths;
  /** What the dataplane reads and sets besides those paths. Default: the addon (tests: a fake). */
  kernel?: IpvsKernel;
}

export interface IpvsPaths {
  /** The companion table's batches: the seam the aggregator's transactions also go through. */
  nft: NftTransport;
  ipvs(ops: IpvsOp[]): Promise<IpvsApplyResult>;
}

/** The rest of the kernel the IPVS dataplane talks to: the module's state, the dummy link and its addresses. */
export interface IpvsKernel {
  info(): Promise<{ version: string; connTableSize: number }>;
  /** Sysctls, strict ARP and IPVS timeouts (kernel-settings.ts). */
  applySettings(s: IpvsSettings, log: (m: string) => void): Promise<void>;
  ensureLink(name: string): Promise<LinkInfo>;
  /** Every address of every link. */
  listAddrs(): Promise<AddrInfo[]>;
  applyAddrs(ops: AddrOp[]): Promise<AddrApplyResult>;
  /** Every virtual server with its real servers. */
  dump(): Promise<IpvsServiceInfo[]>;
  /** These virtual servers with their real servers' connection counts. */
  dumpDests(services: IpvsServiceKey[]): Promise<IpvsServiceInfo[]>;
}

/** The addon's IpvsKernel, in a network namespace or the process's own. */
export function nativeIpvsKernel(call: NativeCallOptions): IpvsKernel {
  return {
    info: () => ipvsInfo(call),
    applySettings: (s, log) => applyIpvsKernelSettings(s, call, log),
    ensureLink: (name) => ensureLink(name, { kind: 'dummy' }, call),
    listAddrs: () => listAddrs(0, call),
    applyAddrs: (ops) => applyAddrs(ops, call),
    dump: () => ipvsDump(call),
    dumpDests: (services) => ipvsDumpDests(services, call),
  };
}

export { IPVS_SYSCTLS } from './kernel-settings';

/** Firewall marks of mark-keyed virtual servers: FWMARK_BASE + n (kept clear of the usual mark bits). */
export const FWMARK_BASE = 0x6b700000;

interface Virtual { vs: IpvsService; eps: Map<string, { ip: string; port: number }>; refs: number }
interface KernelVirtual { vs: IpvsService; dests: Map<string, { address: string; port: number; weight: number }> }

const FAMS: IpFamily[] = ['ip', 'ip6'];
const famOf = (a: string): IpFamily => (a.includes(':') ? 'ip6' : 'ip');

function toIpvsService(v: VirtualPlan, scheduler: string): IpvsService {
  return { address: v.addr, protocol: v.proto, port: v.port, ...(v.fwmark !== undefined ? { fwmark: v.fwmark } : {}), scheduler, persistenceTimeout: v.persistence };
}

export class IpvsDataplane implements Dataplane {
  readonly name = 'ipvs';
  private plans = new Map<string, ServicePlan>();
  private desired = new Map<string, Virtual>();
  private kernel = new Map<string, KernelVirtual>();
  /** Real servers being drained: "svcId dstId". */
  private draining = new Set<string>();
  private addrRefs = new Map<string, number>();
  private boundAddrs = new Set<string>();
  private companion: Record<IpFamily, CompanionTable>;
  private marks = new Map<string, { mark: number; used: boolean }>();
  private nextMark = 1;
  private ifindex = 0;
  private localAddrs: string[] = [];
  private node: NodeInfo | undefined;
  private started = false;
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  readonly counters = { drained: 0, drainDeleted: 0 };

  private readonly paths: IpvsPaths;
  private readonly kernelOps: IpvsKernel;
  private readonly settings: IpvsSettings;

  constructor(private readonly opts: IpvsOptions) {
    this.settings = opts.settings ?? { strictArp: false, timeouts: { tcp: 0, tcpFin: 0, udp: 0 }, excludeCIDRs: [] };
    this.paths = opts.paths ?? { nft: nativeTransport(this.call), ipvs: (ops) => ipvsApply(ops, this.call) };
    this.kernelOps = opts.kernel ?? nativeIpvsKernel(this.call);
    this.companion = { ip: new CompanionTable('ip', opts.table, []), ip6: new CompanionTable('ip6', opts.table, []) };
    if (opts.drainCheckMs > 0) {
      this.timer = setInterval(() => { if (this.draining.size) void this.serial(() => this.reapDrained()).catch((e) => this.opts.log(`ipvs: drain check failed: ${(e as Error).message}`)); }, opts.drainCheckMs);
      this.timer.unref();
    }
  }

  private get call() { return this.opts.netns ? { netns: this.opts.netns } : {}; }


  /** Kernel work one step at a time: syncs and drain checks never interleave. */
  private serial<T>(f: () => Promise<T>): Promise<T> {
    const p = this.queue.then(f, f);
    this.queue = p.catch(() => undefined);
    return p;
  }

  private markFor = (id: string): number => {
    const m = this.marks.get(id);
    if (m) { m.used = true; return m.mark; }
    const mark = FWMARK_BASE + this.nextMark++;
    this.marks.set(id, { mark, used: true });
    return mark;
  };

  private plan(svc: Service): ServicePlan {
    const nodePortAddrsBy = { ip: nodePortAddrs(this.node, 'ip', this.localAddrs), ip6: nodePortAddrs(this.node, 'ip6', this.localAddrs) };
    return planService(svc, { node: this.node, localAddrs: this.localAddrs, markFor: this.markFor, nodePortAddrs: nodePortAddrsBy });
  }

  /** Adds (sign 1) or removes (-1) a plan's contributions to the desired state. */
  private account(p: ServicePlan, sign: 1 | -1, touched: Set<string>): void {
    for (const d of p.dests) {
      const k = destKey(d);
      this.companion[d.fam].setDest(k, sign > 0 ? d : null);
      if (d.bind) {
        this.companion[d.fam].refAddr(d.addr, sign);
        const n = (this.addrRefs.get(d.addr) ?? 0) + sign;
        if (n > 0) this.addrRefs.set(d.addr, n); else this.addrRefs.delete(d.addr);
      }
    }
    for (const e of p.endpointIPs) this.companion[e.fam].refHairpin(e.ip, sign);
    for (const v of p.virtuals) {
      const vs = toIpvsService(v, this.opts.scheduler);
      const id = ipvsServiceId(vs);
      touched.add(id);
      const cur = this.desired.get(id);
      if (sign > 0) {
        const eps = new Map(v.endpoints.map((e) => [ipvsDestId({ address: e.ip, port: e.port }), e]));
        this.desired.set(id, { vs, eps, refs: (cur?.refs ?? 0) + 1 });
      } else if (cur && --cur.refs <= 0) {
        this.desired.delete(id);
      }
    }
  }

  async fullSync(services: Service[], node: NodeInfo | undefined): Promise<SyncReport> {
    return this.serial(() => this.doFullSync(services, node));
  }

  async update(changes: ServiceChange[], node: NodeInfo | undefined): Promise<SyncReport> {
    return this.serial(async () => {
      this.node = node;
      const touched = new Set<string>();
      for (const ch of changes) {
        const old = this.plans.get(ch.key);
        if (old) this.account(old, -1, touched);
        this.plans.delete(ch.key);
        if (ch.new) {
          const p = this.plan(ch.new);
          this.plans.set(ch.key, p);
          this.account(p, 1, touched);
        }
      }
      return this.converge(touched, false);
    });
  }

  private async start(): Promise<void> {
    if (this.started) return;
    const info = await this.kernelOps.info();
    await this.kernelOps.applySettings(this.settings, this.opts.log);
    const link = await this.kernelOps.ensureLink(this.opts.interface);
    this.ifindex = link.ifindex;
    this.opts.log(`ipvs: IPVS ${info.version} (connection table ${info.connTableSize}), ${this.opts.interface} ifindex ${link.ifindex}${link.created ? ' created' : ''}, scheduler ${this.opts.scheduler}`);
    this.started = true;
  }

  private async doFullSync(services: Service[], node: NodeInfo | undefined): Promise<SyncReport> {
    await this.start();
    this.node = node;
    // This node's addresses, for node ports (not kube-ipvs0's, not loopback or link-local).
    const addrs = await this.kernelOps.listAddrs();
    this.localAddrs = addrs.filter((a) => a.ifindex !== this.ifindex && a.scope === 0 && !a.address.startsWith('127.') && a.address !== '::1' && !a.address.startsWith('fe80:')).map((a) => a.address);
    this.boundAddrs = new Set(addrs.filter((a) => a.ifindex === this.ifindex).map((a) => a.address));
    // Rebuild the desired state from scratch; marks keep their numbers when still used.
    for (const m of this.marks.values()) m.used = false;
    this.plans.clear();
    this.desired.clear();
    this.addrRefs.clear();
    for (const fam of FAMS) this.companion[fam].reset(podSources(node, fam === 'ip' ? IPFamily.IPV4 : IPFamily.IPV6));
    const touched = new Set<string>();
    for (const svc of services) {
      const p = this.plan(svc);
      this.plans.set(serviceKey(svc.namespace, svc.name), p);
      this.account(p, 1, touched);
    }
    for (const [id, m] of this.marks) if (!m.used) this.marks.delete(id);
    // What the kernel has: every virtual server (kpng owns IPVS in its network namespace), except those
    // inside --ipvs-exclude-cidrs that no service asks for: someone else's, neither deleted nor drained.
    const dump = (await this.kernelOps.dump()).filter((s) => this.desired.has(ipvsServiceId(s)) || !isExcluded(s, this.settings.excludeCIDRs));
    this.kernel = new Map(dump.map((s) => [ipvsServiceId(s), kernelVirtual(s)]));
    this.draining = new Set();
    for (const s of dump) {
      for (const d of s.dests) if (d.weight === 0) this.draining.add(`${ipvsServiceId(s)} ${ipvsDestId(d)}`);
    }
    for (const id of this.kernel.keys()) touched.add(id);
    return this.converge(touched, true);
  }

  /** Brings the kernel to the desired state for the touched virtual servers, in the order above. */
  private async converge(touched: Set<string>, full: boolean): Promise<SyncReport> {
    const report: SyncReport = { messages: 0, bytes: 0, ms: 0 };
    const t0 = performance.now();
    const early: IpvsOp[] = [], late: IpvsOp[] = [];
    for (const id of touched) this.planVirtual(id, early, late);

    await this.ipvs(early, report);
    const want = new Set(this.addrRefs.keys());
    const addOps: AddrOp[] = [...want].filter((a) => !this.boundAddrs.has(a)).map((address) => ({ op: 'add', ifindex: this.ifindex, address }));
    const delOps: AddrOp[] = [...this.boundAddrs].filter((a) => !want.has(a)).map((address) => ({ op: 'del', ifindex: this.ifindex, address }));
    await this.addrs(addOps, report);
    const nftOps: NftOp[] = [];
    for (const fam of FAMS) {
      const c = this.companion[fam];
      if (full) pushAll(nftOps, c.fullOps(podSources(this.node, fam === 'ip' ? IPFamily.IPV4 : IPFamily.IPV6)));
      else if (c.pending) pushAll(nftOps, c.diffOps());
    }
    if (nftOps.length) {
      const r = await this.paths.nft.apply(nftOps);
      report.messages += r.messages;
      report.bytes += r.bytes;
    }
    for (const fam of FAMS) this.companion[fam].committed(full);
    await this.addrs(delOps, report);
    await this.ipvs(late, report);
    report.ms = performance.now() - t0;
    return report;
  }

  /** The IPVS ops that bring one virtual server to its desired state: additions early, removals late. */
  private planVirtual(id: string, early: IpvsOp[], late: IpvsOp[]): void {
    const want = this.desired.get(id);
    const have = this.kernel.get(id);
    if (!want) {
      if (!have) return;
      // Inside --ipvs-exclude-cidrs: never deleted, even when kpng made it (kube-proxy leaves those too);
      // from now on it is not kpng's.
      if (isExcluded(have.vs, this.settings.excludeCIDRs)) this.opts.log(`ipvs: virtual server ${id} no longer used, left in place (inside --ipvs-exclude-cidrs)`);
      else late.push({ op: 'delService', service: have.vs });
      this.kernel.delete(id);
      for (const d of have.dests.keys()) this.draining.delete(`${id} ${d}`);
      return;
    }
    const k: KernelVirtual = have ?? { vs: want.vs, dests: new Map() };
    if (!have) {
      early.push({ op: 'addService', service: want.vs });
    } else if (have.vs.scheduler !== want.vs.scheduler || (have.vs.persistenceTimeout ?? 0) !== (want.vs.persistenceTimeout ?? 0)) {
      early.push({ op: 'setService', service: want.vs });
    }
    k.vs = want.vs;
    this.kernel.set(id, k);
    for (const [did, e] of want.eps) {
      const d = k.dests.get(did);
      const dest = { address: e.ip, port: e.port, weight: 1 };
      if (!d) early.push({ op: 'addDest', service: want.vs, dest });
      else if (d.weight !== 1) early.push({ op: 'setDest', service: want.vs, dest });
      k.dests.set(did, dest);
      this.draining.delete(`${id} ${did}`);
    }
    for (const [did, d] of k.dests) {
      if (want.eps.has(did)) continue;
      if (want.vs.protocol === 'udp') {
        late.push({ op: 'delDest', service: want.vs, dest: d });
        k.dests.delete(did);
      } else if (!this.draining.has(`${id} ${did}`)) {
        // Graceful termination: no new connections; deleted once the existing ones are gone.
        late.push({ op: 'setDest', service: want.vs, dest: { ...d, weight: 0 } });
        k.dests.set(did, { ...d, weight: 0 });
        this.draining.add(`${id} ${did}`);
        this.counters.drained++;
      }
    }
  }

  private async ipvs(ops: IpvsOp[], report: SyncReport): Promise<IpvsApplyResult | undefined> {
    if (ops.length === 0) return undefined;
    const r = await this.paths.ipvs(ops);
    report.messages += r.messages;
    report.bytes += r.bytes;
    if (r.failed.length || r.unknown) {
      const first = r.failed.slice(0, 3).map((f) => `${f.what}: ${f.code}`).join('; ');
      throw new Error(`ipvs: ${r.failed.length} of ${ops.length} IPVS messages refused${r.unknown ? ' (some replies lost)' : ''}: ${first}`);
    }
    return r;
  }

  private async addrs(ops: AddrOp[], report: SyncReport): Promise<void> {
    if (ops.length === 0) return;
    const r = await this.kernelOps.applyAddrs(ops);
    report.messages += r.messages;
    report.bytes += r.bytes;
    // Deleting an address that is already gone is what we wanted.
    const failed = r.failed.filter((f) => !(ops[f.index]?.op === 'del' && f.code === 'EADDRNOTAVAIL'));
    for (const [i, op] of ops.entries()) {
      if (failed.some((f) => f.index === i)) continue;
      if (op.op === 'add') this.boundAddrs.add(op.address); else this.boundAddrs.delete(op.address);
    }
    if (failed.length || r.unknown) {
      throw new Error(`ipvs: ${failed.length} of ${ops.length} address changes on ${this.opts.interface} refused: ${failed.slice(0, 3).map((f) => `${f.what}: ${f.code}`).join('; ')}`);
    }
  }

  /** Deletes drained real servers that have no connection left (active + inactive). */
  private async reapDrained(): Promise<void> {
    const bySvc = new Map<string, Set<string>>();
    for (const k of this.draining) {
      const [sid, did] = k.split(' ');
      if (!bySvc.has(sid)) bySvc.set(sid, new Set());
      bySvc.get(sid)!.add(did);
    }
    const keys: IpvsServiceKey[] = [];
    for (const sid of bySvc.keys()) { const k = this.kernel.get(sid); if (k) keys.push(k.vs); else for (const d of bySvc.get(sid)!) this.draining.delete(`${sid} ${d}`); }
    const dump = await this.kernelOps.dumpDests(keys);
    const ops: IpvsOp[] = [];
    const present = new Set<string>();
    for (const s of dump) {
      const sid = ipvsServiceId(s);
      const want = bySvc.get(sid);
      if (!want) continue;
      for (const d of s.dests) {
        const did = ipvsDestId(d);
        if (!want.has(did)) continue;
        present.add(`${sid} ${did}`);
        if (d.weight === 0 && d.activeConns + d.inactiveConns === 0) ops.push({ op: 'delDest', service: this.kernel.get(sid)!.vs, dest: d });
      }
    }
    for (const k of [...this.draining]) if (!present.has(k)) this.draining.delete(k);
    if (ops.length === 0) return;
    const r = await this.paths.ipvs(ops);
    ops.forEach((op, i) => {
      if (op.op !== 'delDest' || r.failed.some((f) => f.index === i)) return;
      const sid = ipvsServiceId(op.service), did = ipvsDestId(op.dest);
      this.draining.delete(`${sid} ${did}`);
      this.kernel.get(sid)?.dests.delete(did);
      this.counters.drainDeleted++;
      this.opts.log(`ipvs: drained real server ${did.replace('/', ':')} of ${sid} deleted (no connections left)`);
    });
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.queue;
  }
}

function kernelVirtual(s: IpvsServiceInfo): KernelVirtual {
  const vs: IpvsService = {
    address: s.address, protocol: s.protocol, port: s.port, ...(s.fwmark !== undefined ? { fwmark: s.fwmark } : {}),
    scheduler: s.scheduler, persistenceTimeout: s.persistenceTimeout,
  };
  return { vs, dests: new Map(s.dests.map((d) => [ipvsDestId(d), { address: d.address, port: d.port, weight: d.weight }])) };
}

export { famOf };

// A fake of the kernel the IPVS dataplane talks to (IpvsKernel + IpvsPaths), so that its planning,
// ordering and recovery are tested without a kernel (the failing variant is faulty.ts). It keeps
// virtual servers with their real servers, the links' addresses and the companion table's batches
// (applied to a FakeNft, which refuses them whole as the kernel would), and refuses what the kernel refuses (an existing virtual or real server added again: EEXIST; a
// missing virtual server: ESRCH; a missing real server: ENOENT; an address added twice: EEXIST, a
// missing one deleted: EADDRNOTAVAIL). The guest tests (test/e2e/ipvs*.guest.test.ts) check the real thing.
import type { IpvsKernel, IpvsPaths } from './dataplane';
import { ipvsDestId, ipvsServiceId, type IpvsApplyResult, type IpvsFailure, type IpvsOp, type IpvsServiceInfo, type IpvsServiceKey } from '../../native/ipvs';
import type { ApplyResult, NftOp } from '../../native/nft-types';
import type { NftTransport } from '../../nft/transport';
import { FakeNft } from '../nft/fake';
import type { AddrApplyResult, AddrInfo, AddrOp } from '../../native/rtnl';

/** errno values (Linux x86-64) of what the fake refuses. */
export const IPVS_ERRNOS = { EEXIST: 17, ESRCH: 3, ENOENT: 2, EADDRNOTAVAIL: 99 } as const;

/** Virtual and real servers, links' addresses and companion-table batches in memory. */
export class FakeIpvsKernel implements IpvsKernel, IpvsPaths {
  readonly services = new Map<string, IpvsServiceInfo>();
  /** Addresses by link (ifindex 1: the node's own link, holding `nodeAddrs`). */
  readonly addrs: AddrInfo[] = [];
  readonly links = new Map<string, number>();
  /** Every companion-table batch, in order. */
  readonly nftBatches: NftOp[][] = [];
  /** The nftables kernel the companion table's batches change. */
  readonly nftFake = new FakeNft();
  /** Every IPVS batch, in order. */
  readonly ipvsBatches: IpvsOp[][] = [];
  /** Each call that changes something, in order: "ipvs addService,addDest", "addrs add 10.96.0.1", "nft". */
  readonly calls: string[] = [];
  /** The next IPVS batch fails whole (as a lost reply would), once. */
  failNextIpvs = false;

  constructor(nodeAddrs: string[] = []) {
    for (const a of nodeAddrs) this.addrs.push({ ifindex: 1, family: a.includes(':') ? 'ip6' : 'ip', address: a, prefixLength: a.includes(':') ? 64 : 24, scope: 0, flags: 0 });
  }

  async info() { return { version: '1.2.1', connTableSize: 4096 }; }
  async applySettings() { /* sysctls: nothing to fake */ }

  async ensureLink(name: string) {
    const had = this.links.get(name);
    if (had !== undefined) return { ifindex: had, created: false, up: true };
    const ifindex = 10 + this.links.size;
    this.links.set(name, ifindex);
    return { ifindex, created: true, up: true };
  }

  async listAddrs() { return this.addrs.map((a) => ({ ...a })); }

  async applyAddrs(ops: AddrOp[]): Promise<AddrApplyResult> {
    this.calls.push(`addrs ${ops.map((o) => `${o.op} ${o.address}`).join(',')}`);
    const failed: AddrApplyResult['failed'] = [];
    ops.forEach((op, index) => {
      const at = this.addrs.findIndex((a) => a.ifindex === op.ifindex && a.address === op.address);
      if (op.op === 'add') {
        if (at >= 0) failed.push({ index, what: `add ${op.address}`, errno: IPVS_ERRNOS.EEXIST, code: 'EEXIST' });
        else this.addrs.push({ ifindex: op.ifindex, family: op.address.includes(':') ? 'ip6' : 'ip', address: op.address, prefixLength: op.address.includes(':') ? 128 : 32, scope: 0, flags: 0 });
      } else if (at < 0) failed.push({ index, what: `del ${op.address}`, errno: IPVS_ERRNOS.EADDRNOTAVAIL, code: 'EADDRNOTAVAIL' });
      else this.addrs.splice(at, 1);
    });
    return { messages: ops.length, bytes: ops.length * 40, ms: 0, failed, unknown: false };
  }

  async dump() { return [...this.services.values()].map((s) => ({ ...s, dests: s.dests.map((d) => ({ ...d })) })); }

  async dumpDests(keys: IpvsServiceKey[]) {
    const ids = new Set(keys.map(ipvsServiceId));
    return (await this.dump()).filter((s) => ids.has(ipvsServiceId(s)));
  }

  readonly nft: NftTransport = { apply: (ops) => this.applyNft(ops) };

  protected async applyNft(ops: NftOp[]): Promise<ApplyResult> {
    this.nftBatches.push(ops);
    this.calls.push('nft');
    this.nftFake.applyNft(ops);
    return { messages: ops.length + 2, bytes: ops.length * 64, ms: 0, encodeMs: 0 };
  }

  ipvs = async (ops: IpvsOp[]): Promise<IpvsApplyResult> => {
    this.ipvsBatches.push(ops);
    this.calls.push(`ipvs ${ops.map((o) => o.op).join(',')}`);
    if (this.failNextIpvs) {
      this.failNextIpvs = false;
      return { messages: ops.length, bytes: 0, ms: 0, encodeMs: 0, failed: [], unknown: true };
    }
    const failed: IpvsFailure[] = [];
    ops.forEach((op, index) => {
      const code = this.applyOne(op);
      if (code) failed.push({ index, what: `${op.op}`, errno: IPVS_ERRNOS[code], code });
    });
    return { messages: ops.length, bytes: ops.length * 104, ms: 0, encodeMs: 0, failed, unknown: false };
  };

  protected applyOne(op: IpvsOp): keyof typeof IPVS_ERRNOS | undefined {
    if (op.op === 'flush') { this.services.clear(); return undefined; }
    const id = ipvsServiceId(op.service);
    const svc = this.services.get(id);
    switch (op.op) {
      case 'addService':
        if (svc) return 'EEXIST';
        this.services.set(id, {
          address: op.service.address, protocol: op.service.protocol, port: op.service.port, ...(op.service.fwmark !== undefined ? { fwmark: op.service.fwmark } : {}),
          scheduler: op.service.scheduler, persistenceTimeout: op.service.persistenceTimeout ?? 0, flags: op.service.flags ?? 0,
          family: op.service.address.includes(':') ? 'ip6' : 'ip', netmask: op.service.address.includes(':') ? 128 : 0xffffffff, dests: [],
        });
        return undefined;
      case 'setService':
        if (!svc) return 'ESRCH';
        svc.scheduler = op.service.scheduler;
        svc.persistenceTimeout = op.service.persistenceTimeout ?? 0;
        return undefined;
      case 'delService':
        if (!svc) return 'ESRCH';
        this.services.delete(id);
        return undefined;
    }
    if (!svc) return 'ESRCH';
    const at = svc.dests.findIndex((d) => ipvsDestId(d) === ipvsDestId(op.dest));
    switch (op.op) {
      case 'addDest':
        if (at >= 0) return 'EEXIST';
        svc.dests.push({ address: op.dest.address, port: op.dest.port, weight: op.dest.weight, forward: op.dest.forward ?? 'masq', upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistentConns: 0 });
        return undefined;
      case 'setDest':
        if (at < 0) return 'ENOENT';
        svc.dests[at].weight = op.dest.weight;
        return undefined;
      case 'delDest':
        if (at < 0) return 'ENOENT';
        svc.dests.splice(at, 1);
        return undefined;
    }
    return undefined;
  }

  /** Open connections on a real server (so that a drained one is kept until they end). */
  connect(service: string, dest: string, active: number): void {
    const d = this.services.get(service)?.dests.find((x) => ipvsDestId(x) === dest);
    if (!d) throw new Error(`no real server ${dest} of ${service}`);
    d.activeConns = active;
  }

  /** "tcp/10.96.0.10/80 rr -> 10.244.1.5/8080 w1, ..." per virtual server, sorted; addresses on `link`. */
  text(link = 'kube-ipvs0'): string[] {
    const ifindex = this.links.get(link);
    return [
      ...[...this.services.entries()].map(([id, s]) => `${id} ${s.scheduler}${s.persistenceTimeout ? ` persistent ${s.persistenceTimeout}` : ''} -> ${s.dests.map((d) => `${ipvsDestId(d)} w${d.weight}`).sort().join(', ')}`),
      ...this.addrs.filter((a) => a.ifindex === ifindex).map((a) => `${link} ${a.address}`),
    ].sort();
  }
}

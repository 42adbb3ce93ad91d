// The socket LB's kernel seam (EbpfMaps) failing chosen calls, or a seeded fraction of them, as the
// kernel and the addon really fail, over the in-memory maps of fake.ts:
//   - map batches: BPF map batch updates are not transactions: the addon sends one batch syscall per
//     group, so a failure leaves the groups before it and the elements before it in its group applied
//     (E2BIG: a hash map is full or its preallocated elements are used up; ENOMEM: an element could not
//     be allocated; EBUSY: the bucket lock was held, an update from a BPF program on this CPU);
//   - dumps: the batched lookup fails (ENOMEM);
//   - socket destruction: the kernel cannot destroy sockets (EOPNOTSUPP: no CONFIG_INET_DIAG_DESTROY);
//   - programs and links: the open (load, attach, pin takeover) fails (EPERM: no CAP_BPF or
//     CAP_SYS_ADMIN; ENOENT: the cgroup is gone; EBUSY: another kpng holds the pin directory), and the
//     links are severed between syncs (their cgroup removed), until an open attaches them again;
//   - tampering: another process deletes or overwrites map entries between syncs.
// Everything is seeded: a failing property prints a seed that replays it.
import type { EbpfApplyError, EbpfDump, EbpfMapGroup } from '../../native/ebpf';
import { rng } from '../../util/rng';
import { FakeEbpfMaps } from './fake';
import { SVC_KEY_SIZE, SVC_MAP } from './maps';

/** errno values (Linux x86-64) the open of the programs can fail with, and what each means. */
export const OPEN_ERRNOS: ReadonlyArray<[string, number, string]> = [
  ['EPERM', 1, 'load program kpng_connect4: Operation not permitted (needs CAP_BPF and CAP_SYS_ADMIN)'],
  ['ENOENT', 2, 'open cgroup: No such file or directory'],
  ['EBUSY', 16, 'pin directory is held by another process: Device or resource busy'],
];

/** errno values (Linux x86-64) a BPF map update can fail with. */
export const MAP_UPDATE_ERRNOS: ReadonlyArray<[string, number]> = [['E2BIG', 7], ['ENOMEM', 12], ['EBUSY', 16]];

export interface EbpfFaultPlan {
  /** Fraction of apply calls that fail partway (0..1), drawn from `seed`. */
  rate?: number;
  /** Apply calls (0-based) that fail whatever the rate. */
  calls?: number[];
  /** Fraction of dumps that fail. */
  dumpRate?: number;
  /** Fraction of socket destructions that fail. */
  destroyRate?: number;
  /** Fraction of opens (program load, attach, pin takeover) that fail. */
  openRate?: number;
  /** Fraction of sever() calls that sever the links (as when their cgroup is removed). */
  severRate?: number;
  /** Fraction of tamper() calls that change an entry behind the dataplane's back. */
  tamperRate?: number;
  seed?: number;
}

export interface InjectedFault { call: number; code: string; group: number; element: number }

/** The in-memory maps failing as their plan says. */
export class FaultyEbpfMaps extends FakeEbpfMaps {
  /** Faults are injected while true; set false to let the kernel heal. */
  faulty = true;
  calls = 0;
  readonly injected: InjectedFault[] = [];
  /** The next apply that writes something fails (then this turns false again). */
  failNext = false;
  dumpFailures = 0;
  destroyFailures = 0;
  openFailures = 0;
  opens = 0;
  severings = 0;
  tamperings = 0;
  /** Service addresses a connect() would have found inconsistent at the moment a batch failed. */
  readonly inconsistentAtFailure: string[] = [];
  private readonly random: () => number;

  constructor(private readonly plan: EbpfFaultPlan = {}) {
    super();
    this.random = rng(plan.seed ?? 1);
  }

  private chosen(rate: number | undefined, call?: number): boolean {
    if (!this.faulty) return false;
    return (call !== undefined && this.plan.calls?.includes(call) === true) || this.random() < (rate ?? 0);
  }

  override async apply(groups: EbpfMapGroup[]): Promise<{ syscalls: number; ms: number }> {
    const call = this.calls++;
    const sent = groups.filter((g) => g.count > 0);
    if (sent.length === 0 || !(this.failNext || this.chosen(this.plan.rate, call))) return super.apply(groups);
    this.failNext = false;
    // Where it fails: a group, and an element of it; what comes before is in the maps.
    const group = Math.floor(this.random() * sent.length);
    const element = Math.floor(this.random() * sent[group]!.count);
    const before = sent.slice(0, group);
    const partial = sent[group]!;
    const keySize = partial.map === SVC_MAP ? SVC_KEY_SIZE : 4;
    if (element > 0) {
      before.push({ ...partial, count: element, keys: partial.keys.subarray(0, element * keySize), values: partial.values?.subarray(0, element * 20) });
    }
    if (before.length > 0) await super.apply(before);
    this.inconsistentAtFailure.push(...this.inconsistent());
    const [code, errno] = MAP_UPDATE_ERRNOS[Math.floor(this.random() * MAP_UPDATE_ERRNOS.length)]!;
    this.injected.push({ call, code, group, element });
    const what = partial.op === 'delete' ? 'delete' : 'update';
    const e = new Error(`${what} ${partial.map}: ${code}`) as EbpfApplyError;
    return Promise.reject(Object.assign(e, { errno, code, group, element, syscalls: group + 1 }));
  }

  /**
   * The dataplane's `open`: fails as the plan draws (nothing attached), otherwise attaches afresh
   * over the same maps (pinned maps outlive their links), which replaces severed links.
   */
  async open(): Promise<this> {
    if (this.chosen(this.plan.openRate)) {
      this.openFailures++;
      const [code, errno, message] = OPEN_ERRNOS[Math.floor(this.random() * OPEN_ERRNOS.length)]!;
      throw Object.assign(new Error(message), { errno, code });
    }
    this.opens++;
    this.severedLinks = [];
    return this;
  }

  /** Severs the links if the plan draws it (a cgroup removed between syncs). */
  sever(): boolean {
    if (this.severedLinks.length > 0 || !this.chosen(this.plan.severRate)) return false;
    this.severings++;
    this.severedLinks = ['kpng_connect4', 'kpng_sendmsg4'];
    return true;
  }

  /** Deletes or overwrites one entry if the plan draws it (another process with the pinned maps). */
  tamper(): boolean {
    if (this.svc.size === 0 || !this.chosen(this.plan.tamperRate)) return false;
    this.tamperings++;
    const keys = [...this.svc.keys()];
    const k = keys[Math.floor(this.random() * keys.length)]!;
    if (this.random() < 0.5) this.svc.delete(k);
    else {
      const v = Buffer.from(this.svc.get(k)!);
      v[0]! ^= 0xff;
      this.svc.set(k, v);
    }
    return true;
  }

  override async dump(map: string): Promise<EbpfDump> {
    if (this.chosen(this.plan.dumpRate)) {
      this.dumpFailures++;
      throw Object.assign(new Error(`dump ${map}: ENOMEM`), { errno: 12, code: 'ENOMEM' });
    }
    return super.dump(map);
  }

  override async destroySockets(b: Buffer, n: number) {
    if (this.chosen(this.plan.destroyRate)) {
      this.destroyFailures++;
      throw Object.assign(new Error('destroy sockets: EOPNOTSUPP'), { errno: 95, code: 'EOPNOTSUPP' });
    }
    return super.destroySockets(b, n);
  }
}

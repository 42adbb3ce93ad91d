// The nft backend's kernel seam (NftKernel) failing chosen calls, or a seeded fraction of them, as the
// kernel and the addon really fail; over the fake tables of fake.ts, or wrapping another NftKernel
// (the native one, in a test namespace):
//   - refused: the transaction is rejected and nothing changes (ENOMEM: an allocation failed; EBUSY: an
//     object still in use; ENFILE: a set reached its size; ENOBUFS: the socket could not take the batch),
//     reported the way src/native/index.ts reports it (NftApplyError: errno, code, failed[]);
//   - lost: the kernel committed, but its acknowledgement never arrived (the addon says EPROTO: "the
//     kernel dropped the batch without acknowledging it"), so kpng must not trust what it believes
//     the table holds;
//   - conntrack: the ctnetlink dump or delete fails (EINTR: the table changed during the dump; ENOBUFS).
// Everything is seeded: a failing property prints a seed that replays it.
//
// FaultyNftTransport is the NftOp batch seam's variant (the aggregator's, the IPVS companion's): it
// refuses the batches that hold an op a predicate names, reporting those ops as the addon does.
import type { ApplyResult, ConntrackFilter, NftApplyError, NftFailure, NftOp } from '../../native/nft-types';
import type { NftTransport } from '../../nft/transport';
import { rng } from '../../util/rng';
import { fakeNftKernel, fakeNftTransport, FakeNft } from './fake';
import type { KernelApplyResult, NftKernel } from './sink';
import type { FamOps } from './types';

export type NftFault = 'refused' | 'lost';

/** errno values (Linux x86-64) of the failures a commit can meet. */
export const REFUSED_ERRNOS: ReadonlyArray<[string, number]> = [['ENOMEM', 12], ['EBUSY', 16], ['ENFILE', 23], ['ENOBUFS', 105]];
const CONNTRACK_ERRNOS: ReadonlyArray<[string, number]> = [['EINTR', 4], ['ENOBUFS', 105]];

export interface NftFaultPlan {
  /** Fraction of apply calls that fail (0..1), drawn from `seed`. */
  rate?: number;
  /** Apply calls (0-based) that fail whatever the rate. */
  calls?: number[];
  /** Which faults to draw from (default both). */
  kinds?: NftFault[];
  /** Fraction of conntrack deletes that fail. */
  conntrackRate?: number;
  seed?: number;
}

function applyError(code: string, errno: number, message: string, object: string): NftApplyError {
  const e = new Error(message) as NftApplyError;
  e.errno = errno;
  e.code = code;
  e.failed = code === 'EPROTO' ? [] : [{ index: 0, op: 'add', object, errno, code }];
  return e;
}

/** An NftKernel that fails as its plan says, over its own FakeNft or around the kernel it wraps. */
export class FaultyNftKernel implements NftKernel {
  /** The fake tables (when no other kernel is wrapped). */
  readonly fake = new FakeNft();
  private readonly inner: NftKernel;
  /** Faults are injected while true; set false to let the kernel heal. */
  faulty = true;
  calls = 0;
  readonly injected: Array<{ call: number; fault: NftFault; code: string }> = [];
  conntrackFailures = 0;
  private readonly random: () => number;

  constructor(private readonly plan: NftFaultPlan = {}, inner?: NftKernel) {
    this.random = rng(plan.seed ?? 1);
    this.inner = inner ?? fakeNftKernel(this.fake);
  }

  private draw(): NftFault | undefined {
    const call = this.calls++;
    if (!this.faulty) return undefined;
    const chosen = this.plan.calls?.includes(call) || this.random() < (this.plan.rate ?? 0);
    if (!chosen) return undefined;
    const kinds = this.plan.kinds ?? ['refused', 'lost'];
    return kinds[Math.floor(this.random() * kinds.length)];
  }

  async apply(table: string, famOps: FamOps[]): Promise<KernelApplyResult> {
    const fault = this.draw();
    if (fault === 'refused') {
      const [code, errno] = REFUSED_ERRNOS[Math.floor(this.random() * REFUSED_ERRNOS.length)]!;
      this.injected.push({ call: this.calls - 1, fault, code });
      throw applyError(code, errno, `nftables batch rejected: add table ${table}: ${code}`, `table ip ${table}`);
    }
    // A commit is atomic: the kernel (or the fake) takes all of it, or rejects it and keeps what it had.
    const r = await this.inner.apply(table, famOps);
    if (fault === 'lost') {
      this.injected.push({ call: this.calls - 1, fault, code: 'EPROTO' });
      throw applyError('EPROTO', 71, 'nftables batch: the kernel dropped the batch without acknowledging it', `table ip ${table}`);
    }
    return r;
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }

  async conntrackDelete(filters: ConntrackFilter[]): Promise<number> {
    if (this.faulty && this.random() < (this.plan.conntrackRate ?? 0)) {
      this.conntrackFailures++;
      const [code, errno] = CONNTRACK_ERRNOS[Math.floor(this.random() * CONNTRACK_ERRNOS.length)]!;
      throw Object.assign(new Error(`conntrack delete: ${code}`), { code, errno });
    }
    return this.inner.conntrackDelete(filters);
  }
}

/**
 * An NftTransport over a FakeNft that refuses every batch holding an op `refuse` gives a reason for
 * (EINVAL, as the kernel refuses a bad expression): nothing of it applied, the NftApplyError's
 * `failed[].index` naming each such op, as the addon reports them. Every batch is kept in `batches`.
 */
export class FaultyNftTransport implements NftTransport {
  readonly fake = new FakeNft();
  private readonly kernel = fakeNftTransport(this.fake);
  batches: NftOp[][] = [];
  refuse: (o: NftOp) => string | undefined = () => undefined;

  async apply(ops: NftOp[]): Promise<ApplyResult> {
    this.batches.push(ops);
    const failed: NftFailure[] = [];
    ops.forEach((o, index) => {
      const why = this.refuse(o);
      if (why) failed.push({ index, op: o.op, object: 'rule' in o ? `rule ${o.rule.table} ${o.rule.chain}` : 'object', errno: 22, code: 'EINVAL', message: why });
    });
    if (failed.length) {
      const e = new Error(`nftables batch rejected: ${failed[0]!.object}: EINVAL (${failed[0]!.message})`) as NftApplyError;
      e.failed = failed; e.errno = 22; e.code = 'EINVAL';
      throw e;
    }
    return this.kernel.apply(ops);
  }
}

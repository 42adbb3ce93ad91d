// The IPVS dataplane's kernel (fake.ts) failing a seeded fraction of what it is asked, as the kernel
// fails (what each call fails with: the class comment). Everything is seeded: a failing property
// prints a seed that replays it.
import type { IpvsApplyResult, IpvsFailure, IpvsOp } from '../../native/ipvs';
import type { ApplyResult, NftOp } from '../../native/nft-types';
import type { AddrApplyResult, AddrOp } from '../../native/rtnl';
import { rng } from '../../util/rng';
import { FakeIpvsKernel, IPVS_ERRNOS } from './fake';

/**
 * The fake, failing a fraction of what the IPVS dataplane asks, as the kernel does: IPVS messages
 * refused one by one (ENOMEM: nothing done; the batch is not a transaction, the others apply) or
 * applied with their replies lost (the socket overflowed: ENOBUFS on receive, `unknown`), address
 * changes refused (ENOMEM, ENOBUFS), the companion nftables batch rejected whole (ENOMEM).
 */
export class FaultyIpvsKernel extends FakeIpvsKernel {
  faulty = true;
  readonly injected: string[] = [];
  /** Seeded: a failing property replays. */
  private readonly random: () => number;

  constructor(nodeAddrs: string[], private readonly rate: number, seed: number) {
    super(nodeAddrs);
    this.random = rng(seed);
  }

  private hit(): boolean { return this.faulty && this.random() < this.rate; }

  override ipvs = async (ops: IpvsOp[]): Promise<IpvsApplyResult> => {
    this.ipvsBatches.push(ops);
    const failed: IpvsFailure[] = [];
    let unknown = false;
    ops.forEach((op, index) => {
      if (this.hit()) {
        if (this.random() < 0.5) { this.injected.push(`ipvs ${op.op} ENOMEM`); failed.push({ index, what: op.op, errno: 12, code: 'ENOMEM' }); return; }
        this.injected.push(`ipvs ${op.op} reply lost`);
        unknown = true;
      }
      const code = this.applyOne(op);
      if (code) failed.push({ index, what: op.op, errno: IPVS_ERRNOS[code], code });
    });
    return { messages: ops.length, bytes: ops.length * 104, ms: 0, encodeMs: 0, failed, unknown };
  };

  override async applyAddrs(ops: AddrOp[]): Promise<AddrApplyResult> {
    const kept: AddrOp[] = [], refused: Array<{ at: number; code: string; errno: number }> = [];
    ops.forEach((op, i) => {
      if (this.hit()) { const [code, errno] = this.random() < 0.5 ? ['ENOMEM', 12] : ['ENOBUFS', 105]; refused.push({ at: i, code, errno }); this.injected.push(`addr ${op.op} ${code}`); } else kept.push(op);
    });
    const r = await super.applyAddrs(kept);
    // Indexes of the kept ops back to the caller's.
    const map = ops.map((_, i) => i).filter((i) => !refused.some((x) => x.at === i));
    return { ...r, failed: [...r.failed.map((f) => ({ ...f, index: map[f.index]! })), ...refused.map((x) => ({ index: x.at, what: `${ops[x.at]!.op} ${ops[x.at]!.address}`, errno: x.errno, code: x.code }))] };
  }

  protected override async applyNft(ops: NftOp[]): Promise<ApplyResult> {
    if (this.hit()) {
      this.injected.push('nft ENOMEM');
      throw Object.assign(new Error('nftables batch rejected: add table ip kpng-ipvs: ENOMEM'), { errno: 12, code: 'ENOMEM', failed: [] });
    }
    return super.applyNft(ops);
  }
}

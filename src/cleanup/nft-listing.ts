// What a clean-up needs to read from nf_tables: which tables exist, and for one table its chains and
// the rules that jump or go to another chain. kpng's backends never list the kernel (they keep their
// own model); a clean-up has to, because it removes objects some other process made.
import { loadNative, NFPROTO, type NativeCallOptions, type NftFamily } from '../native';
import { EXPR_ATTRS, VERDICT } from '../native/encode';

export interface TableRef { family: NftFamily; name: string }

export interface ChainRef {
  name: string;
  /** Hooked into the packet path (PREROUTING, INPUT, ...): made by iptables-nft, never ours to delete. */
  base: boolean;
  /** How many rules it holds. */
  rules: number;
}

/** A rule whose verdict is a jump or goto to `target` (a chain of the same table). */
export interface JumpRule { chain: string; handle: number; target: string }

export interface TableJumps { chains: ChainRef[]; jumps: JumpRule[] }

const FAMILY_BY_NUMBER = new Map<number, NftFamily>(Object.entries(NFPROTO).map(([k, v]) => [v, k as NftFamily]));

/** Every nftables table of the namespace. */
export async function listTables(call?: NativeCallOptions): Promise<TableRef[]> {
  const raw = await loadNative().nftListTables(call?.netns);
  const out: TableRef[] = [];
  for (const t of raw) {
    const family = FAMILY_BY_NUMBER.get(t.family);
    if (family) out.push({ family, name: t.name });
  }
  return out;
}

const [IMM_VERDICT] = EXPR_ATTRS.immediate.verdict;
const [IMM_CHAIN] = EXPR_ATTRS.immediate.chain;

/** The chain a listed expression jumps or goes to, if it is such a verdict. */
function jumpTarget(expr: { name: string; attrs: Record<number, Uint8Array> }): string | undefined {
  if (expr.name !== 'immediate') return undefined;
  const v = expr.attrs[IMM_VERDICT];
  const chain = expr.attrs[IMM_CHAIN];
  if (!v || v.length < 4 || !chain) return undefined;
  const code = Buffer.from(v.buffer, v.byteOffset, v.byteLength).readInt32LE(0);
  if (code !== VERDICT.jump && code !== VERDICT.goto) return undefined;
  return Buffer.from(chain.buffer, chain.byteOffset, chain.byteLength).toString('utf8').replace(/\0.*$/s, '');
}

/** One table's chains and jump rules (no sets: a clean-up never needs them). */
export async function listJumps(table: TableRef, call?: NativeCallOptions): Promise<TableJumps> {
  const raw = await loadNative().nftListChains(NFPROTO[table.family], table.name, call?.netns);
  const counts = new Map<string, number>();
  for (const r of raw.rules) counts.set(r.chain, (counts.get(r.chain) ?? 0) + 1);
  const chains = raw.chains.map((c) => ({ name: c.name, base: c.hooknum !== undefined, rules: counts.get(c.name) ?? 0 }));
  const jumps: JumpRule[] = [];
  for (const r of raw.rules) {
    for (const x of r.exprs) {
      const target = jumpTarget(x);
      if (target !== undefined) { jumps.push({ chain: r.chain, handle: r.handle, target }); break; }
    }
  }
  return { chains, jumps };
}

// nftables tables deleted whole: kpng's (kpng, kpng-ipvs) and upstream kube-proxy's nftables mode
// (kube-proxy), in the ip and ip6 families. A table's chains, sets and rules go with it in one
// transaction per table, so a failure leaves that table as it was and the others still go.
import { nftApply, type NativeCallOptions } from '../native';
import { listTables, type TableRef } from './nft-listing';
import { errorLine, type CleanupReport } from './report';

/** Upstream kube-proxy's nftables mode: one table of this name in ip and in ip6. */
export const UPSTREAM_NFT_TABLE = 'kube-proxy';

/** kpng's tables by default: --nft-table / --ebpf-nft-table (kpng) and --ipvs-nft-table (kpng-ipvs). */
export const KPNG_NFT_TABLES: readonly string[] = ['kpng', 'kpng-ipvs'];

const FAMILIES = new Set(['ip', 'ip6']);

/** Deletes the ip / ip6 tables of these names that exist; an absent one is not an error. */
export async function deleteTables(names: readonly string[], call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  const tables: string[] = [];
  const errors: CleanupReport['errors'] = [];
  let present: TableRef[];
  try {
    present = (await listTables(call)).filter((t) => FAMILIES.has(t.family) && names.includes(t.name));
  } catch (e) {
    return { errors: [errorLine('nftables', 'listing tables', e)] };
  }
  for (const t of present) {
    const what = `${t.family} ${t.name}`;
    try {
      await nftApply([{ op: 'delete', table: { family: t.family, name: t.name } }], call);
      tables.push(what);
    } catch (e) {
      // Gone between the listing and the delete: what was asked holds.
      if ((e as { code?: string }).code !== 'ENOENT') errors.push(errorLine('nftables', what, e));
    }
  }
  return { tables, errors };
}

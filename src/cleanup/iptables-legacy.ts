// Upstream kube-proxy's iptables (and IPVS) mode chains as iptables-legacy made them: the same
// chains as in iptables-nft.ts (isKubeProxyChain: the kubelet's KUBE-FIREWALL, KUBE-KUBELET-CANARY and
// KUBE-IPTABLES-HINT stay), but in the kernel's x_tables, which only get/setsockopt reach
// (native/iptables_legacy.cc; no iptables binary is run).
//
// Per table ONE replace drops kube-proxy's chains and every rule elsewhere that jumps or goes to
// them; the kernel refuses it when the table changed since it was read, and the addon then reads
// and plans again. Only the tables the kernel lists are touched: asking for another would create it.
// A kernel without legacy x_tables (no /proc/net/ip_tables_names) has nothing to remove.
import { iptLegacyList, iptLegacyRemoveChains, iptLegacyTables, type IptFamily } from '../native/iptables-legacy';
import type { NativeCallOptions } from '../native';
import { isKubeProxyChain } from './iptables-nft';
import { errorLine, type CleanupReport } from './report';

export type LegacyFamily = 'ip' | 'ip6';

/** One of kube-proxy's chains found in iptables-legacy (for a report such as "ip nat KUBE-SERVICES: 12 rules"). */
export interface LegacyKubeProxyChain { family: LegacyFamily; table: string; chain: string; rules: number }

const FAMILIES: ReadonlyArray<readonly [LegacyFamily, IptFamily]> = [['ip', 4], ['ip6', 6]];

const isEnoent = (e: unknown): boolean => (e as { code?: string })?.code === 'ENOENT';

/** kube-proxy's chains in one listed table; none when the table went away meanwhile. */
async function kubeChainsOf(family: IptFamily, table: string, call: NativeCallOptions): Promise<{ chain: string; rules: number }[]> {
  try {
    const listing = await iptLegacyList(family, table, call);
    return listing.chains.filter((c) => !c.builtin && isKubeProxyChain(c.name)).map((c) => ({ chain: c.name, rules: c.rules }));
  } catch (e) {
    if (isEnoent(e)) return [];
    throw e;
  }
}

/** kube-proxy's chains left in iptables-legacy, ip and ip6, with their rule counts. Throws on a kernel error. */
export async function listLegacyKubeProxyChains(call: NativeCallOptions): Promise<LegacyKubeProxyChain[]> {
  const out: LegacyKubeProxyChain[] = [];
  for (const [family, n] of FAMILIES) {
    for (const table of (await iptLegacyTables(n, call)) ?? []) {
      for (const c of await kubeChainsOf(n, table, call)) out.push({ family, table, ...c });
    }
  }
  return out;
}

/** Removes kube-proxy's chains and the jumps to them from every legacy x_tables table of ip and ip6. */
export async function removeLegacyKubeProxyChains(call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  const out: Required<Pick<CleanupReport, 'legacyChains' | 'jumpRules' | 'notes' | 'errors'>> = { legacyChains: [], jumpRules: 0, notes: [], errors: [] };
  for (const [family, n] of FAMILIES) {
    let tables: string[] | null;
    try {
      tables = await iptLegacyTables(n, call);
    } catch (e) {
      out.errors.push(errorLine('iptables-legacy', `listing ${family} legacy tables`, e));
      continue;
    }
    for (const table of tables ?? []) {
      const where = `${family} ${table}`;
      try {
        const chains = (await kubeChainsOf(n, table, call)).map((c) => c.chain);
        if (chains.length === 0) continue;
        const r = await iptLegacyRemoveChains(n, table, chains, call);
        out.legacyChains.push(...r.chains.map((c) => `${where} ${c}`));
        out.jumpRules += r.jumps.length;
        if (!r.countersRestored) out.notes.push(`${where}: the kept iptables-legacy rules' packet counters restart at zero`);
      } catch (e) {
        if (isEnoent(e)) continue; // the table went away: nothing of kube-proxy's in it
        out.errors.push(errorLine('iptables-legacy', `kube-proxy chains of ${where}`, e));
      }
    }
  }
  return out;
}

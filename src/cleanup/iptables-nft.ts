// Upstream kube-proxy's iptables (and IPVS) mode chains, as iptables-nft made them: user chains named
// KUBE-... in the xtables-compatible tables (filter, nat, mangle, ...) of the ip and ip6 families, and
// the rules of other chains that jump to them (PREROUTING -> KUBE-SERVICES, ...).
//
// Like upstream's CleanupLeftovers (pkg/proxy/iptables/cleanup.go, pkg/proxy/ipvs/cleanup.go), only
// kube-proxy's own chains go: its fixed chains and its per-service / per-endpoint chains (KUBE-SVC-,
// KUBE-SEP-, ...). The kubelet's KUBE-FIREWALL, KUBE-KUBELET-CANARY and KUBE-IPTABLES-HINT stay: the
// kubelet keeps using them whatever the proxy. Per table, ONE transaction deletes the jump rules by
// handle, flushes the chains (which drops the jumps between them), then deletes them: nothing can see
// half a clean-up.
//
// The tables themselves (filter, nat, ...) stay even when this leaves them empty: iptables-nft, the
// kubelet, a CNI or a firewall share them and expect to find them; an empty base chain costs one hook
// call per packet, nothing worth racing them for.
//
// iptables-legacy (x_tables, set with setsockopt, not netlink) has its own file, iptables-legacy.ts,
// which removes the same chains (isKubeProxyChain).
import { nftApply, type NativeCallOptions, type NftOp } from '../native';
import { listJumps, listTables, type TableJumps, type TableRef } from './nft-listing';
import { errorLine, type CleanupReport } from './report';

/** The tables iptables-nft makes (ip for iptables, ip6 for ip6tables). */
export const XTABLES_TABLES: readonly string[] = ['filter', 'nat', 'mangle', 'raw', 'security'];

/** kube-proxy's fixed chains, iptables mode and IPVS mode (pkg/proxy/iptables, pkg/proxy/ipvs proxier.go). */
const KUBE_PROXY_CHAINS = new Set([
  'KUBE-SERVICES', 'KUBE-EXTERNAL-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ',
  'KUBE-FORWARD', 'KUBE-PROXY-FIREWALL', 'KUBE-PROXY-CANARY',
  'KUBE-NODE-PORT', 'KUBE-LOAD-BALANCER', 'KUBE-SOURCE-RANGES-FIREWALL', 'KUBE-IPVS-FILTER', 'KUBE-IPVS-OUT-FILTER',
]);
/** Per service port (cluster / local policy, firewall, external) and per endpoint; KUBE-XLB- is the pre-1.24 name of KUBE-EXT-. */
const KUBE_PROXY_CHAIN_PREFIXES = ['KUBE-SVC-', 'KUBE-SVL-', 'KUBE-FW-', 'KUBE-EXT-', 'KUBE-SEP-', 'KUBE-XLB-'];

/** A chain upstream kube-proxy made (and its clean-up removes). */
export function isKubeProxyChain(name: string): boolean {
  return KUBE_PROXY_CHAINS.has(name) || KUBE_PROXY_CHAIN_PREFIXES.some((p) => name.startsWith(p));
}

export interface TableCleanupPlan {
  /** One transaction: jump rules deleted, then chains flushed, then chains deleted. */
  ops: NftOp[];
  chains: string[];
  jumpRules: number;
}

/** What to remove from one listed table; empty ops when it holds none of kube-proxy's chains. */
export function planTableCleanup(table: TableRef, listing: TableJumps): TableCleanupPlan {
  const { family, name } = table;
  const chains = listing.chains.filter((c) => !c.base && isKubeProxyChain(c.name)).map((c) => c.name);
  const doomed = new Set(chains);
  // Rules inside the doomed chains go with the flush; the others are deleted one by one.
  const jumps = listing.jumps.filter((j) => doomed.has(j.target) && !doomed.has(j.chain));
  const ops: NftOp[] = [
    ...jumps.map((j): NftOp => ({ op: 'delete', rule: { family, table: name, chain: j.chain, handle: j.handle, exprs: [] } })),
    ...chains.map((c): NftOp => ({ op: 'flush', chain: { family, table: name, name: c } })),
    ...chains.map((c): NftOp => ({ op: 'delete', chain: { family, table: name, name: c } })),
  ];
  return { ops, chains, jumpRules: jumps.length };
}

// A rule or chain may change between the listing and the transaction (kube-proxy still running, or
// the kubelet adding its rules): the transaction then fails as a whole and is planned again.
const ATTEMPTS = 3;

async function cleanTable(table: TableRef, call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  const where = `${table.family} ${table.name}`;
  let last: unknown;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    let plan: TableCleanupPlan;
    try {
      plan = planTableCleanup(table, await listJumps(table, call));
    } catch (e) {
      if ((e as { code?: string }).code === 'ENOENT') return {}; // the table is gone: nothing of ours in it
      return { errors: [errorLine('iptables-nft', `listing ${where}`, e)] };
    }
    if (plan.ops.length === 0) return {};
    try {
      await nftApply(plan.ops, call);
      return { chains: plan.chains.map((c) => `${where} ${c}`), jumpRules: plan.jumpRules };
    } catch (e) {
      last = e;
    }
  }
  return { errors: [errorLine('iptables-nft', `kube-proxy chains of ${where}`, last)] };
}

/** Removes kube-proxy's chains and the jumps to them from every xtables table of ip and ip6. */
export async function removeKubeProxyChains(call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  let tables: TableRef[];
  try {
    tables = (await listTables(call)).filter((t) => (t.family === 'ip' || t.family === 'ip6') && XTABLES_TABLES.includes(t.name));
  } catch (e) {
    return { errors: [errorLine('iptables-nft', 'listing tables', e)] };
  }
  const out: Required<Pick<CleanupReport, 'chains' | 'jumpRules' | 'errors'>> = { chains: [], jumpRules: 0, errors: [] };
  for (const t of tables) {
    const r = await cleanTable(t, call);
    out.chains.push(...(r.chains ?? []));
    out.jumpRules += r.jumpRules ?? 0;
    out.errors.push(...(r.errors ?? []));
  }
  return out;
}


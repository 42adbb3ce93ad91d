// `kpng --cleanup`: removes from this node, through netlink (and x_tables' sockopts) only, what kpng
// programmed and what upstream kube-proxy leaves behind, then reports what went. Each kernel
// subsystem has its own file:
//   nft-tables.ts       nftables tables deleted whole: kpng's (kpng, kpng-ipvs), upstream's (kube-proxy)
//   iptables-nft.ts     upstream's iptables / IPVS mode chains (KUBE-SERVICES, KUBE-SVC-..., ...) and
//                       the jumps to them, as iptables-nft made them
//   iptables-legacy.ts  the same chains and jumps as iptables-legacy made them (x_tables, through
//                       get/setsockopt on a raw socket; no iptables binary is run)
//   ipset.ts            upstream's IPVS mode ipsets (KUBE-CLUSTER-IP, ...), once no rule uses them
//   bpf.ts              kpng's eBPF programs, links and maps pinned under --bpffs
//   ipvs.ts             IPVS virtual services (not those in --ipvs-exclude-cidrs)
//   link.ts             the kube-ipvs0 dummy link
// Missing objects are not errors. A failure in one part never stops the others.
//
// For the CLI: `--cleanup` calls cleanupNode({ log, pinDir, ipvsExcludeCIDRs }) and exits with
// cleanupExitCode(report): 0 when `report.errors` is empty (everything that was present is gone), 1
// otherwise; cleanupNode already logs each error and summarizeReport(report) at info. After kpng's
// first successful sync it calls removeUpstreamRules(log, { keepIpvs, kpngTables }), so a node
// migrating from kube-proxy ends with only kpng's rules.
import { canonicalCIDR } from '../model/ip';
import type { NativeCallOptions } from '../native';
import type { Logger } from '../util/log';
import { removePins, DEFAULT_PIN_DIR } from './bpf';
import { removeKubeProxyChains } from './iptables-nft';
import { removeLegacyKubeProxyChains } from './iptables-legacy';
import { removeKubeProxyIpsets } from './ipset';
import { removeIpvsServices } from './ipvs';
import { removeDummyLink, IPVS_DUMMY_LINK } from './link';
import { deleteTables, KPNG_NFT_TABLES, UPSTREAM_NFT_TABLE } from './nft-tables';
import { emptyReport, mergeReport, removedAnything, summarizeReport, type CleanupReport, type CleanupWhich } from './report';

export { summarizeReport, cleanupExitCode, removedAnything, emptyReport, type CleanupReport, type CleanupWhich, type CleanupError, type CleanupPart } from './report';
export { DEFAULT_PIN_DIR } from './bpf';
export { KPNG_NFT_TABLES, UPSTREAM_NFT_TABLE } from './nft-tables';
export { IPVS_DUMMY_LINK } from './link';
export { IPVS_NOT_AVAILABLE } from './ipvs';
export { isKubeProxyChain } from './iptables-nft';
export { listLegacyKubeProxyChains, type LegacyKubeProxyChain } from './iptables-legacy';
export { KUBE_PROXY_IPSETS, IPSET_NOT_AVAILABLE } from './ipset';

export interface CleanupOptions {
  log: Logger;
  /** kpng's eBPF pin directory (--bpffs); default /sys/fs/bpf/kpng. */
  pinDir?: string;
  /** IPVS virtual services whose address is in one of these CIDRs stay (--ipvs-exclude-cidrs). */
  ipvsExcludeCIDRs?: string[];
  /** 'kpng': kpng's objects; 'upstream': kube-proxy's; 'all' (default): both. */
  which?: CleanupWhich;
  /** kpng's nftables table names (--nft-table, --ebpf-nft-table, --ipvs-nft-table); default kpng, kpng-ipvs. */
  kpngTables?: string[];
  /** Clean this network namespace (a path such as /var/run/netns/NAME) instead of the caller's. */
  netns?: string;
}

export interface UpstreamCleanupOptions {
  /** Leave IPVS virtual services and kube-ipvs0: kpng runs the IPVS backend and they are its own now. */
  keepIpvs?: boolean;
  ipvsExcludeCIDRs?: string[];
  /** The tables kpng itself uses now (its --nft-table may have been named kube-proxy): never deleted. */
  kpngTables?: string[];
  netns?: string;
  /** Log the summary only when something was removed or failed (a check again after the first). */
  quietWhenNothing?: boolean;
}

function checkedCIDRs(cidrs: readonly string[] | undefined): string[] {
  return (cidrs ?? []).map((c) => {
    const ok = canonicalCIDR(c);
    if (!ok) throw new RangeError(`ipvsExcludeCIDRs: ${JSON.stringify(c)} is not a CIDR`);
    return ok;
  });
}

/** IPVS services and kube-ipvs0: shared by kpng's IPVS backend and upstream's IPVS mode. */
async function removeIpvs(report: CleanupReport, excludeCIDRs: string[], call: NativeCallOptions): Promise<void> {
  mergeReport(report, await removeIpvsServices(excludeCIDRs, call));
  mergeReport(report, await removeDummyLink(IPVS_DUMMY_LINK, call));
}

async function removeUpstream(report: CleanupReport, call: NativeCallOptions, keepTables: readonly string[] = []): Promise<void> {
  if (!keepTables.includes(UPSTREAM_NFT_TABLE)) mergeReport(report, await deleteTables([UPSTREAM_NFT_TABLE], call));
  mergeReport(report, await removeKubeProxyChains(call));
  // Before the ipsets: IPVS mode's legacy rules reference them too.
  mergeReport(report, await removeLegacyKubeProxyChains(call));
  mergeReport(report, await removeKubeProxyIpsets(call));
}

/**
 * Removes kpng's and/or upstream kube-proxy's objects from the node (see the top of this file) and
 * reports what went. Resolves even when some part failed: `errors` says what is left. Throws only on
 * bad options (a malformed CIDR, an unknown `which`), before anything is removed.
 */
export async function cleanupNode(opts: CleanupOptions): Promise<CleanupReport> {
  const which = opts.which ?? 'all';
  if (!['kpng', 'upstream', 'all'].includes(which)) throw new RangeError(`which: kpng, upstream or all, got ${JSON.stringify(which)}`);
  const excludeCIDRs = checkedCIDRs(opts.ipvsExcludeCIDRs);
  const call: NativeCallOptions = opts.netns ? { netns: opts.netns } : {};
  const report = emptyReport();
  if (which !== 'upstream') {
    mergeReport(report, await deleteTables(opts.kpngTables ?? KPNG_NFT_TABLES, call));
    mergeReport(report, await removePins(opts.pinDir ?? DEFAULT_PIN_DIR));
  }
  if (which !== 'kpng') await removeUpstream(report, call);
  await removeIpvs(report, excludeCIDRs, call);
  for (const e of report.errors) opts.log.error(`clean-up: ${e.part}: ${e.what}: ${e.message}`);
  opts.log.info(summarizeReport(report));
  return report;
}

/**
 * Removes what upstream kube-proxy left on the node: its nftables tables, its iptables-nft and
 * iptables-legacy chains and jumps, its IPVS mode's ipsets, and (unless keepIpvs) IPVS virtual
 * services and kube-ipvs0. For a node migrating from kube-proxy: call it once kpng has programmed the
 * node, so no service is ever left unprogrammed.
 */
export async function removeUpstreamRules(log: Logger, opts: UpstreamCleanupOptions = {}): Promise<CleanupReport> {
  const call: NativeCallOptions = opts.netns ? { netns: opts.netns } : {};
  const excludeCIDRs = checkedCIDRs(opts.ipvsExcludeCIDRs);
  const report = emptyReport();
  await removeUpstream(report, call, opts.kpngTables);
  if (!opts.keepIpvs) await removeIpvs(report, excludeCIDRs, call);
  for (const e of report.errors) log.error(`clean-up: ${e.part}: ${e.what}: ${e.message}`);
  if (!opts.quietWhenNothing || removedAnything(report) || report.errors.length) log.info(summarizeReport(report));
  return report;
}

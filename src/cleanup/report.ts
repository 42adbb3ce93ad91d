// What a clean-up removed, kept and failed at. One report for every kernel subsystem, so the CLI can
// print it and choose its exit code from `errors` alone.

/** Which objects a clean-up looks for: kpng's own, the ones upstream kube-proxy leaves, or both. */
export type CleanupWhich = 'kpng' | 'upstream' | 'all';

/** The kernel subsystem a line of the report is about. */
export type CleanupPart = 'nftables' | 'iptables-nft' | 'iptables-legacy' | 'ipset' | 'bpf' | 'ipvs' | 'link';

export interface CleanupError {
  part: CleanupPart;
  /** The object or step, e.g. "ip nat KUBE-SERVICES" or "IPVS dump". */
  what: string;
  /** errno name when the kernel gave one (EBUSY, EPERM, ...). */
  code?: string;
  message: string;
}

export interface CleanupReport {
  /** nftables tables deleted whole, "family name" (e.g. "ip kube-proxy", "ip6 kpng"). */
  tables: string[];
  /** iptables-nft chains flushed and deleted, "family table chain" (e.g. "ip nat KUBE-SERVICES"). */
  chains: string[];
  /** iptables-legacy (x_tables) chains removed, "family table chain" (e.g. "ip nat KUBE-SERVICES"). */
  legacyChains: string[];
  /** Rules outside those chains (either kind) that jumped to them (e.g. PREROUTING -> KUBE-SERVICES), deleted. */
  jumpRules: number;
  /** ipsets of upstream's IPVS mode destroyed (KUBE-CLUSTER-IP, ...). */
  ipsets: string[];
  /** BPF pins removed under the pin directory (links first detached). */
  pins: string[];
  /** IPVS virtual services deleted, e.g. "tcp 10.96.0.10:80". */
  ipvsServices: string[];
  /** IPVS virtual services left because their address is in an excluded CIDR. */
  ipvsKept: string[];
  /** Links deleted (kube-ipvs0). */
  links: string[];
  /** Things worth saying that are no failure, e.g. "IPVS not available". */
  notes: string[];
  /** What could not be removed. Empty: everything that was present is gone. */
  errors: CleanupError[];
}

export function emptyReport(): CleanupReport {
  return {
    tables: [], chains: [], legacyChains: [], jumpRules: 0, ipsets: [], pins: [], ipvsServices: [], ipvsKept: [], links: [], notes: [], errors: [],
  };
}

/** Whether the clean-up found and removed anything (notes and errors aside). */
export function removedAnything(r: CleanupReport): boolean {
  return r.tables.length + r.chains.length + r.legacyChains.length + r.jumpRules + r.ipsets.length + r.pins.length + r.ipvsServices.length + r.links.length > 0;
}

/** `kpng --cleanup`'s exit status: 0 when everything that was present is gone, 1 when something is left. */
export function cleanupExitCode(r: CleanupReport): 0 | 1 {
  return r.errors.length === 0 ? 0 : 1;
}

/** Adds `more` into `into` (a part's own report into the whole). */
export function mergeReport(into: CleanupReport, more: Partial<CleanupReport>): CleanupReport {
  into.tables.push(...(more.tables ?? []));
  into.chains.push(...(more.chains ?? []));
  into.legacyChains.push(...(more.legacyChains ?? []));
  into.jumpRules += more.jumpRules ?? 0;
  into.ipsets.push(...(more.ipsets ?? []));
  into.pins.push(...(more.pins ?? []));
  into.ipvsServices.push(...(more.ipvsServices ?? []));
  into.ipvsKept.push(...(more.ipvsKept ?? []));
  into.links.push(...(more.links ?? []));
  into.notes.push(...(more.notes ?? []));
  into.errors.push(...(more.errors ?? []));
  return into;
}

/** An error thrown by a native call as a report line (the addon's errors carry `code`). */
export function errorLine(part: CleanupPart, what: string, e: unknown): CleanupError {
  const err = e as { code?: unknown; message?: unknown };
  return {
    part, what, message: typeof err?.message === 'string' ? err.message : String(e),
    ...(typeof err?.code === 'string' ? { code: err.code } : {}),
  };
}

/** One line per kind of object, for the log: "removed 2 tables (ip kpng, ip6 kpng), 14 chains, ...". */
export function summarizeReport(r: CleanupReport): string {
  const part = (n: number, what: string, names?: string[]) =>
    (n ? `${n} ${what}${names && names.length <= 6 ? ` (${names.join(', ')})` : ''}` : '');
  const removed = [
    part(r.tables.length, 'nftables tables', r.tables), part(r.chains.length, 'iptables-nft chains', r.chains),
    part(r.legacyChains.length, 'iptables-legacy chains', r.legacyChains),
    part(r.jumpRules, 'jump rules'), part(r.ipsets.length, 'ipsets', r.ipsets), part(r.pins.length, 'BPF pins', r.pins),
    part(r.ipvsServices.length, 'IPVS services', r.ipvsServices), part(r.links.length, 'links', r.links),
  ].filter(Boolean);
  const kept = r.ipvsKept.length ? `; kept ${r.ipvsKept.length} IPVS services in excluded CIDRs` : '';
  const notes = r.notes.length ? `; ${r.notes.join('; ')}` : '';
  const errors = r.errors.length ? `; ${r.errors.length} errors` : '';
  return `clean-up: ${removed.length ? `removed ${removed.join(', ')}` : 'nothing to remove'}${kept}${notes}${errors}`;
}

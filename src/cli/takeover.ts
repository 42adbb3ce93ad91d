// kpng taking a node over from kube-proxy, and handing it back: `--cleanup` removes kpng's and/or
// kube-proxy's rules and exits; a kernel backend removes kube-proxy's rules once its own first sync is
// in the kernel (before that, kube-proxy's rules are what serves the node). src/cleanup does the work.
import type { FlagValue } from '../backend/registry';
import type { Logger } from '../util/log';
import type { CleanupWhich } from '../cleanup';

const TABLE_FLAGS = ['nft-table', 'ebpf-nft-table', 'ipvs-nft-table'];

/** kpng's nftables tables: the defaults and whatever the backend's flags name. */
export function kpngTables(flags: Record<string, FlagValue>, defaults: readonly string[]): string[] {
  const named = TABLE_FLAGS.map((f) => flags[f]).filter((v): v is string => typeof v === 'string' && v !== '');
  return [...new Set([...defaults, ...named])];
}

export interface CleanupRequest {
  which: CleanupWhich;
  flags: Record<string, FlagValue>;
  ipvsExcludeCIDRs: string[];
}

/** `--cleanup`: the exit code (0 when everything that was there is gone). */
export async function runCleanup(req: CleanupRequest, log: Logger): Promise<number> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const c = require('../cleanup') as typeof import('../cleanup');
  const pinDir = typeof req.flags.bpffs === 'string' ? req.flags.bpffs : undefined;
  try {
    const report = await c.cleanupNode({ log, which: req.which, pinDir, ipvsExcludeCIDRs: req.ipvsExcludeCIDRs, kpngTables: kpngTables(req.flags, c.KPNG_NFT_TABLES) });
    return c.cleanupExitCode(report);
  } catch (e) {
    log.error(`cleanup: ${(e as Error).message}`);
    return 1;
  }
}

/**
 * When kube-proxy's rules are looked for again after the first clean-up, ms after it: a kube-proxy
 * still running at kpng's first sync (its pod terminating: 30 s of grace by default) may write them
 * back at its next sync before it stops, and they would then stay.
 */
export const TAKEOVER_RECHECKS_MS: readonly number[] = [10_000, 30_000, 60_000];

/**
 * After kpng's first sync: kube-proxy's rules go (kept: the tables kpng itself uses, and IPVS when kpng
 * runs IPVS); then again at each of `rechecksMs` (until `signal` aborts), said only when something was
 * there. Resolves after the first clean-up.
 */
export async function removeKubeProxyRules(backend: string, flags: Record<string, FlagValue>, log: Logger,
  opts: { signal?: AbortSignal; rechecksMs?: readonly number[] } = {}): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const c = require('../cleanup') as typeof import('../cleanup');
  const once = async (again: boolean) => {
    try {
      // It logs what it removed (and each error) itself.
      const r = await c.removeUpstreamRules(log, { keepIpvs: backend === 'ipvs', kpngTables: kpngTables(flags, []), quietWhenNothing: again });
      if (again && c.removedAnything(r)) log.info('clean-up: kube-proxy\'s rules were back after the first clean-up (kube-proxy was still running then): removed again');
    } catch (e) {
      log.warn(`kube-proxy's rules: not removed: ${(e as Error).message}`);
    }
  };
  await once(false);
  for (const ms of opts.rechecksMs ?? []) {
    const t = setTimeout(() => { if (!opts.signal?.aborted) void once(true); }, ms);
    t.unref();
    opts.signal?.addEventListener('abort', () => clearTimeout(t), { once: true });
  }
}

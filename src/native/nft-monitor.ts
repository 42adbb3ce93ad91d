// Typed API of the addon's nf_tables change monitor (native/nft_monitor.cc): what other processes
// commit to nftables, per transaction, with who committed it. kpng's own transactions are skipped by
// pid; pause() around them also keeps the kernel from building their notifications at all.
import { loadNative } from './index';
import { NFPROTO, type NativeCallOptions, type NftFamily } from './nft-types';

/** Objects a transaction added (+) or deleted (-) in one table. */
export type NftChangeKind = 'table+' | 'table-' | 'chain+' | 'chain-' | 'rule+' | 'rule-' | 'set+' | 'set-'
  | 'element+' | 'element-' | 'object+' | 'object-' | 'flowtable+' | 'flowtable-';

export interface NftTableChange { family: NftFamily | 'unknown'; table: string; kind: NftChangeKind; count: number }

/** One transaction of another process, or notifications lost (the socket's buffer overflowed). */
export type NftForeignCommit = { overflow: false; pid: number; comm: string; changes: NftTableChange[] } | { overflow: true };

export interface NftMonitor {
  /** Leaves the notification group (around the caller's own transactions). */
  pause(): void;
  resume(): void;
  close(): void;
}

interface RawEvent { overflow?: boolean; pid?: number; comm?: string; changes?: { family: number; table: string; kind: NftChangeKind; count: number }[] }
interface MonitorNative { nftMonitor(cb: (e: RawEvent) => void, netns?: string): NftMonitor }

const FAMILY = new Map<number, NftFamily>(Object.entries(NFPROTO).map(([k, v]) => [v, k as NftFamily]));

/** Starts watching (in `call.netns` if given). Throws when the socket cannot be opened. */
export function startNftMonitor(onCommit: (c: NftForeignCommit) => void, call?: NativeCallOptions): NftMonitor {
  const addon = loadNative() as unknown as MonitorNative;
  return addon.nftMonitor((e) => {
    if (e.overflow) onCommit({ overflow: true });
    else onCommit({ overflow: false, pid: e.pid ?? 0, comm: e.comm ?? '', changes: (e.changes ?? []).map((c) => ({ ...c, family: FAMILY.get(c.family) ?? 'unknown' })) });
  }, call?.netns);
}

/** "1 table deleted, 3 rules added" for a log line. */
export function describeChanges(changes: readonly NftTableChange[]): string {
  const words: Record<string, string> = { table: 'table', chain: 'chain', rule: 'rule', set: 'set', element: 'element', object: 'object', flowtable: 'flowtable' };
  const totals = new Map<string, number>();
  for (const c of changes) totals.set(c.kind, (totals.get(c.kind) ?? 0) + c.count);
  return [...totals].map(([k, n]) => `${n} ${words[k.slice(0, -1)]}${n === 1 ? '' : 's'} ${k.endsWith('+') ? 'added' : 'deleted'}`).join(', ');
}

// The aggregator's flags, shared by every kernel backend that can go through it (--to nft, ebpf,
// ipvs): one definition object per flag, registered by each of those backends (the registry accepts
// the same object from several backends). No native code is loaded here.
import { parseDuration } from '../util/duration';
import type { BackendFlag, FlagValue } from '../util/flag-types';

export const AGGREGATOR_FLAGS: BackendFlag[] = [
  { name: 'aggregator', type: 'boolean', default: false, help: 'send the backend\'s nftables tables (and IPVS messages) through the node\'s aggregator (producer "kpng"): one transaction with other producers\' changes, rate limited' },
  { name: 'aggregator-listen', type: 'string', placeholder: 'unix:///PATH', help: 'with --aggregator: serve outside producers (kpng publish) on this unix socket (mode 0600)' },
  { name: 'aggregator-min-interval', type: 'string', placeholder: 'D', default: '100ms', help: 'with --aggregator: minimum time between commits of one subsystem (nftables, IPVS) once the burst is spent' },
  { name: 'aggregator-burst', type: 'string', placeholder: 'N', default: '3', help: 'with --aggregator: commits of one subsystem allowed back to back' },
];

export interface AggregatorFlags { enabled: boolean; listen?: string; minIntervalMs: number; burst: number }

/** The aggregator flags of a backend context, validated (a clear error for a bad value). */
export function aggregatorFlags(flags: Record<string, FlagValue>): AggregatorFlags {
  const text = String(flags['aggregator-min-interval'] ?? '100ms');
  const minIntervalMs = parseDuration(text);
  if (minIntervalMs === null) throw new Error(`--aggregator-min-interval: ${JSON.stringify(text)} is not a duration (e.g. 100ms, 1s, 0)`);
  const b = String(flags['aggregator-burst'] ?? '3');
  if (!/^\d+$/.test(b) || Number(b) < 1) throw new Error(`--aggregator-burst: ${JSON.stringify(b)} is not a whole number >= 1`);
  const listen = typeof flags['aggregator-listen'] === 'string' && flags['aggregator-listen'] ? flags['aggregator-listen'] : undefined;
  if (listen && !flags.aggregator) throw new Error('--aggregator-listen needs --aggregator');
  return { enabled: !!flags.aggregator, listen, minIntervalMs, burst: Number(b) };
}

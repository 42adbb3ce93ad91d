// kube-proxy's conntrack settings (--conntrack-* flags, KubeProxyConfiguration.conntrack), applied the way
// kube-proxy applies them: nf_conntrack_max only raised (from max-per-core x CPUs, at least min, at
// most 1M), the hash table grown to a quarter of it, each timeout written when set and different.
// Through /proc/sys and /sys, never a process. Timeouts are per network namespace; nf_conntrack_max and
// hashsize are host-wide (read-only inside a namespace: a failure there is a warning, not fatal).
import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from '../util/log';

export interface ConntrackSettings {
  maxPerCore?: number;
  min?: number;
  /** Seconds. */
  tcpEstablishedTimeout?: number;
  tcpCloseWaitTimeout?: number;
  tcpBeLiberal?: boolean;
  udpTimeout?: number;
  udpStreamTimeout?: number;
}

const MAX_LIMIT = 1048576;

export function conntrackMax(s: ConntrackSettings, cpus: number): number {
  if (!s.maxPerCore || s.maxPerCore <= 0) return 0;
  const scaled = s.maxPerCore * cpus;
  if (scaled > MAX_LIMIT) return MAX_LIMIT;
  return Math.max(scaled, s.min ?? 0);
}

export interface SysctlIO {
  read(path: string): number | null;
  write(path: string, value: number): void;
}

export const realSysctlIO: SysctlIO = {
  read(path) {
    try { const v = Number(fs.readFileSync(path, 'utf8').trim()); return Number.isFinite(v) ? v : null; } catch { return null; }
  },
  write(path, value) { fs.writeFileSync(path, String(value)); },
};

const SYSCTL = '/proc/sys/net/netfilter/';
const HASHSIZE = '/sys/module/nf_conntrack/parameters/hashsize';

/** Applies the settings; returns what was written. Problems are logged as warnings. */
export function applyConntrack(s: ConntrackSettings, log: Logger, io: SysctlIO = realSysctlIO, cpus = os.availableParallelism()): string[] {
  const done: string[] = [];
  const set = (name: string, value: number, onlyRaise = false) => {
    const path = name.startsWith('/') ? name : SYSCTL + name;
    const cur = io.read(path);
    if (cur === value || (onlyRaise && cur !== null && cur >= value)) return;
    try {
      io.write(path, value);
      log.info(`conntrack: set ${path} = ${value}${cur === null ? '' : ` (was ${cur})`}`);
      done.push(`${path}=${value}`);
    } catch (e) {
      log.warn(`conntrack: cannot set ${path} = ${value}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };
  const max = conntrackMax(s, cpus);
  if (max > 0) {
    set('nf_conntrack_max', max, true);
    set(HASHSIZE, Math.floor(max / 4), true);
  }
  if (s.tcpEstablishedTimeout && s.tcpEstablishedTimeout > 0) set('nf_conntrack_tcp_timeout_established', s.tcpEstablishedTimeout);
  if (s.tcpCloseWaitTimeout && s.tcpCloseWaitTimeout > 0) set('nf_conntrack_tcp_timeout_close_wait', s.tcpCloseWaitTimeout);
  if (s.tcpBeLiberal) set('nf_conntrack_tcp_be_liberal', 1);
  if (s.udpTimeout && s.udpTimeout > 0) set('nf_conntrack_udp_timeout', s.udpTimeout);
  if (s.udpStreamTimeout && s.udpStreamTimeout > 0) set('nf_conntrack_udp_timeout_stream', s.udpStreamTimeout);
  return done;
}

/** kube-proxy's --oom-score-adj: written to /proc/self/oom_score_adj. */
export function applyOomScoreAdj(value: number, log: Logger, path = '/proc/self/oom_score_adj'): void {
  try {
    fs.writeFileSync(path, String(value));
  } catch (e) {
    log.warn(`cannot set oom_score_adj to ${value}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

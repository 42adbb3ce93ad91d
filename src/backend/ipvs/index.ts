// IPVS backend: `kpng ... --to ipvs [--ipvs-scheduler rr]`. Its design: docs/backends/ipvs.md.
import * as native from '../../native';
import { KernelSink } from '../kernel/kernel-sink';
import { IpvsDataplane, type IpvsOptions } from './dataplane';

export { IpvsDataplane, IPVS_SYSCTLS, FWMARK_BASE, type IpvsOptions } from './dataplane';
export { planService } from './plan';
export { ipvsSettings, isExcluded, type IpvsSettings } from './settings';
export { applyIpvsKernelSettings, STRICT_ARP_SYSCTLS } from './kernel-settings';

/** Schedulers of Linux 6.1 (modules ip_vs_<name>); the kernel loads the module on first use. */
export const IPVS_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'fo', 'ovf', 'mh', 'twos'];

export function createIpvsSink(opts: IpvsOptions): KernelSink {
  if (!IPVS_SCHEDULERS.includes(opts.scheduler)) {
    throw new Error(`--ipvs-scheduler: unknown scheduler ${JSON.stringify(opts.scheduler)} (one of ${IPVS_SCHEDULERS.join(', ')})`);
  }
  const call = opts.netns ? { netns: opts.netns } : {};
  return new KernelSink(new IpvsDataplane(opts), { log: opts.log, conntrackDelete: (f) => native.conntrackDelete(f, call) });
}

// Localhost node ports (kube-proxy's iptables mode): a connection from 127.0.0.1 DNATed to a pod leaves
// the node through another interface, and its replies come back to 127.0.0.1 through it. The kernel
// routes 127.0.0.0/8 across interfaces only with route_localnet; kube-proxy sets it for all interfaces
// (per network namespace), and so does kpng, through /proc/sys, never a process.
import type { Logger } from '../util/log';
import { realSysctlIO, type SysctlIO } from './conntrack';

export const ROUTE_LOCALNET = '/proc/sys/net/ipv4/conf/all/route_localnet';

/** Sets route_localnet=1 unless already set; returns whether it is set afterwards. Failures are warnings. */
export function applyRouteLocalnet(log: Logger, io: SysctlIO = realSysctlIO): boolean {
  const cur = io.read(ROUTE_LOCALNET);
  if (cur === 1) return true;
  try {
    io.write(ROUTE_LOCALNET, 1);
    log.info(`localhost node ports: set ${ROUTE_LOCALNET} = 1${cur === null ? '' : ` (was ${cur})`}`);
    return true;
  } catch (e) {
    log.warn(`localhost node ports: cannot set ${ROUTE_LOCALNET} = 1 (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): node ports on 127.0.0.1 will not answer; `
      + 'run kpng --init-only in a privileged init container, or set the sysctl on the node');
    return false;
  }
}

// A /proc/sys and /sys fake (SysctlIO, src/config/conntrack.ts) that fails chosen entries as the kernel
// and a container do: EROFS (/proc/sys mounted read-only, the usual unprivileged pod), EACCES (no
// CAP_NET_ADMIN in the namespace's owner), EPERM (a host-wide entry written from a network namespace
// other than the initial one), EINVAL (a value the kernel refuses); an unreadable entry reads as absent.
import type { SysctlIO } from '../../src/config/conntrack';

export type SysctlFault = 'EROFS' | 'EACCES' | 'EPERM' | 'EINVAL';

export class FaultySysctl implements SysctlIO {
  readonly writes: string[] = [];
  constructor(readonly files: Map<string, number>, readonly writeFaults: Map<string, SysctlFault> = new Map(), readonly unreadable: Set<string> = new Set()) {}

  read(path: string): number | null {
    if (this.unreadable.has(path)) return null;
    return this.files.get(path) ?? null;
  }

  write(path: string, value: number): void {
    const code = this.writeFaults.get(path);
    if (code) throw Object.assign(new Error(`${code}: ${path}`), { code });
    this.files.set(path, value);
    this.writes.push(`${path}=${value}`);
  }
}

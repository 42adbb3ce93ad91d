// The sysctl fake (fake.ts) failing chosen entries as the kernel and a container do: EROFS (/proc/sys
// mounted read-only, the usual unprivileged pod), EACCES (no CAP_NET_ADMIN in the namespace's owner),
// EPERM (a host-wide entry written from a network namespace other than the initial one), EINVAL (a
// value the kernel refuses); an unreadable entry reads as absent.
import { FakeSysctl } from './fake';

export type SysctlFault = 'EROFS' | 'EACCES' | 'EPERM' | 'EINVAL';

/** A FakeSysctl whose writes of `writeFaults`' paths throw (an error with that `code`) and whose `unreadable` paths read as null. */
export class FaultySysctl extends FakeSysctl {
  constructor(files: Map<string, number>, readonly writeFaults: Map<string, SysctlFault> = new Map(), readonly unreadable: Set<string> = new Set()) {
    super(files);
  }

  override read(path: string): number | null {
    if (this.unreadable.has(path)) return null;
    return super.read(path);
  }

  override write(path: string, value: number): void {
    const code = this.writeFaults.get(path);
    if (code) throw Object.assign(new Error(`${code}: ${path}`), { code });
    super.write(path, value);
  }
}

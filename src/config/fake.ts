// /proc/sys and /sys in memory behind SysctlIO (conntrack.ts), for tests of the settings kpng writes
// there without root (the failing variant is faulty.ts).
import type { SysctlIO } from './conntrack';

/** Entries by path; a missing one reads as absent (null), as an unreadable file does. */
export class FakeSysctl implements SysctlIO {
  /** Every write that succeeded, "path=value", in order. */
  readonly writes: string[] = [];
  constructor(readonly files: Map<string, number> = new Map()) {}

  read(path: string): number | null {
    return this.files.get(path) ?? null;
  }

  write(path: string, value: number): void {
    this.files.set(path, value);
    this.writes.push(`${path}=${value}`);
  }
}

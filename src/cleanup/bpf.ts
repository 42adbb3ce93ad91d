// kpng's eBPF socket load balancer: its links and maps pinned under the pin directory (--bpffs).
// Detaching a pinned link removes the program from its cgroup; the maps go with their last pin.
import { ebpfCleanup } from '../native/ebpf';
import { errorLine, type CleanupReport } from './report';

/** The eBPF backend's default pin directory (--bpffs). */
export const DEFAULT_PIN_DIR = '/sys/fs/bpf/kpng';

/** Detaches and unpins everything under pinDir and removes the directory; an absent one is nothing to do. */
export async function removePins(pinDir: string): Promise<Partial<CleanupReport>> {
  try {
    return { pins: await ebpfCleanup(pinDir) };
  } catch (e) {
    return { errors: [errorLine('bpf', pinDir, e)] };
  }
}

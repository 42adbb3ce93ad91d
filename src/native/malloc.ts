// glibc malloc arenas for a long-running agent. Every thread that allocates (the libuv pool that runs
// the addon's kernel batches, V8's platform workers) gets its own malloc arena, up to 8 per core, and
// an arena keeps what was freed in it. Under churn kpng's resident set grew that way while its JS
// heap stayed flat; with 2 arenas it did not grow.
// glibc reads MALLOC_ARENA_MAX only at start, so the cap is set through mallopt() as early as kpng can
// (arenas that exist by then stay; the cap applies to the threads that allocate later).
import { loadNative } from './index';

/** Arenas kpng asks for: the main thread's and one shared by every other thread. */
export const ARENA_MAX = 2;

/** What a malloc setting became: set here, left to the environment, or unavailable (no addon or no glibc). */
export type MallocSetting = 'set' | 'user' | 'unavailable';

/**
 * Caps glibc's malloc arenas at ARENA_MAX. 'user': MALLOC_ARENA_MAX is in the environment (theirs
 * wins); 'unavailable': no addon, or a C library without arenas (musl).
 */
export function limitMallocArenas(env: NodeJS.ProcessEnv = process.env): MallocSetting {
  if (env.MALLOC_ARENA_MAX !== undefined) return 'user';
  try {
    return loadNative().mallocTune({ arenaMax: ARENA_MAX }).applied.includes('arenaMax') ? 'set' : 'unavailable';
  } catch {
    return 'unavailable';
  }
}

/** glibc's own default thresholds (128 KiB), kept fixed. */
export const MALLOC_THRESHOLD = 128 * 1024;

/**
 * Fixes malloc's mmap and trim thresholds at glibc's defaults. glibc raises both after a large block
 * is freed (up to 32 / 64 MiB), and then keeps what later frees leave at the top of an arena. Under
 * churn the memory outside V8's heap then rises further, and that sets the process's peak on a
 * small cluster. 'user': the environment sets one of them (theirs win).
 */
export function fixMallocThresholds(env: NodeJS.ProcessEnv = process.env): MallocSetting {
  if (env.MALLOC_MMAP_THRESHOLD_ !== undefined || env.MALLOC_TRIM_THRESHOLD_ !== undefined || /malloc\.(mmap|trim)_threshold/.test(env.GLIBC_TUNABLES ?? '')) return 'user';
  try {
    return loadNative().mallocTune({ mmapThreshold: MALLOC_THRESHOLD, trimThreshold: MALLOC_THRESHOLD }).applied.length === 2 ? 'set' : 'unavailable';
  } catch {
    return 'unavailable';
  }
}

/** Gives memory freed in every arena back to the kernel (in a worker); false when nothing went back. */
export async function trimMalloc(): Promise<boolean> {
  try {
    return await loadNative().mallocTrim();
  } catch {
    return false;
  }
}

/**
 * Trims the arenas every `intervalMs` (in a worker; the timer does not keep the process alive). The
 * arenas of threads that existed before the cap (V8's platform workers compile and mark there) keep
 * growing under churn otherwise.
 */
export function trimMallocEvery(intervalMs: number, signal: AbortSignal): void {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void trimMalloc().finally(() => { busy = false; });
  }, intervalMs);
  timer.unref();
  signal.addEventListener('abort', () => clearInterval(timer), { once: true });
}

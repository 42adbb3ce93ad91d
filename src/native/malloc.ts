// glibc malloc arenas for a long-running agent. Every thread that allocates (the libuv pool that runs
// the addon's kernel batches, V8's platform workers) gets its own malloc arena, up to 8 per core, and
// an arena keeps what was freed in it. Under churn (1k services, 50 endpoint writes/s) kpng's resident
// set grew by 11-16 MiB in 30 s that way while its JS heap stayed flat; with 2 arenas it did not grow.
// glibc reads MALLOC_ARENA_MAX only at start, so the cap is set through mallopt() as early as kpng can
// (arenas that exist by then stay; the cap applies to the threads that allocate later).
import { loadNative } from './index';

/** Arenas kpng asks for: the main thread's and one shared by every other thread. */
export const ARENA_MAX = 2;

export type ArenaLimit = 'set' | 'user' | 'unavailable';

/**
 * Caps glibc's malloc arenas at ARENA_MAX. 'user': MALLOC_ARENA_MAX is in the environment (theirs
 * wins); 'unavailable': no addon, or a C library without arenas (musl).
 */
export function limitMallocArenas(env: NodeJS.ProcessEnv = process.env): ArenaLimit {
  if (env.MALLOC_ARENA_MAX !== undefined) return 'user';
  try {
    return loadNative().mallocTune({ arenaMax: ARENA_MAX }).applied.includes('arenaMax') ? 'set' : 'unavailable';
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

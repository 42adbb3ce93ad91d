// Node's on-disk compile cache for kpng's own process: the bytecode of every module kpng loads
// (its own, client-node's, protobufjs...) is kept between runs, so a restart skips compiling them.
// Node checks each entry against the module's source and its own version, so a stale entry is
// recompiled, not used.
import * as fs from 'node:fs';
import * as nodeModule from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';

/** Where the cache goes: KPNG_COMPILE_CACHE (empty or "off": none), else a kpng directory. */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string | null {
  const v = env.KPNG_COMPILE_CACHE;
  if (v !== undefined) return v === '' || v === 'off' ? null : v;
  return uid === 0 ? '/var/cache/kpng/compile-cache' : path.join(os.tmpdir(), `kpng-compile-cache-${uid}`);
}

/**
 * mkdir -p, one level at a time. Node's recursive mkdirSync (and enableCompileCache's own) never
 * returns for a path the kernel refuses with ENOENT although its parent exists (under /proc).
 */
function makeDir(dir: string): void {
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = path.dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw e;
    makeDir(parent);
    fs.mkdirSync(dir, { mode: 0o700 });
  }
}

export interface CompileCacheResult { enabled: boolean; directory?: string; reason?: string }

/** Turns the cache on (NODE_COMPILE_CACHE, read by node itself at start, wins). Never throws. */
export function enableCompileCache(dir = compileCacheDir()): CompileCacheResult {
  const m = nodeModule as typeof nodeModule & { enableCompileCache?: (d: string) => { status: number; message?: string; directory?: string }; constants?: { compileCacheStatus?: Record<string, number> } };
  if (!m.enableCompileCache) return { enabled: false, reason: 'this node has no compile cache' };
  if (dir === null && !process.env.NODE_COMPILE_CACHE) return { enabled: false, reason: 'KPNG_COMPILE_CACHE is off' };
  try {
    if (dir !== null) makeDir(dir);
    const r = m.enableCompileCache(dir ?? process.env.NODE_COMPILE_CACHE!);
    const s = m.constants?.compileCacheStatus ?? { ENABLED: 1, ALREADY_ENABLED: 2 };
    if (r.status === s.ENABLED || r.status === s.ALREADY_ENABLED) return { enabled: true, directory: r.directory };
    return { enabled: false, directory: dir ?? undefined, reason: r.message ?? `status ${r.status}` };
  } catch (e) {
    return { enabled: false, directory: dir ?? undefined, reason: (e as Error).message };
  }
}

/** Writes what was compiled so far (node otherwise writes it only at a clean exit). */
export function flushCompileCache(): void {
  try { (nodeModule as { flushCompileCache?: () => void }).flushCompileCache?.(); } catch { /* best effort */ }
}

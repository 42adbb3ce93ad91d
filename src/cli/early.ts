// Imported first by main.ts, for what must happen before any other module loads: the compile
// cache (util/compile-cache.ts) so that every later module comes from it, and V8's optimizing
// compilers are deferred (util/jit.ts), because Node's own module loader gets hot and is optimized
// while kpng's modules load (a compiler turned off later still had its machine code paged
// in). Only when kpng is the process (bin/kpng.js or cli/main.js), never for a library user or a
// test that imports main.
import { enableCompileCache, type CompileCacheResult } from '../util/compile-cache';
import { deferOptimizingCompilersFor } from '../util/jit';

/** What enableCompileCache() did at start (main logs it), or undefined when kpng is not the process. */
export let compileCache: CompileCacheResult | undefined;

const entry = require.main?.filename ?? '';
if (/[/\\](bin[/\\]kpng\.js|cli[/\\]main\.js)$/.test(entry)) {
  compileCache = enableCompileCache();
  deferOptimizingCompilersFor(process.argv.slice(2));
}

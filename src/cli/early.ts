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

/** The oldest Node.js kpng runs on (package.json's engines): module hooks and the undici it bundles. */
export const MIN_NODE: readonly [number, number] = [22, 19];

/** Why this Node.js cannot run kpng, or undefined when it can. */
export function nodeTooOld(version: string = process.versions.node): string | undefined {
  const [major, minor] = version.split('.').map(Number);
  if (major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1])) return undefined;
  return `needs Node.js ${MIN_NODE.join('.')} or later; this is Node.js ${version} (${process.execPath})`;
}

const entry = require.main?.filename ?? '';
if (/[/\\](bin[/\\]kpng\.js|cli[/\\]main\.js)$/.test(entry)) {
  // Before any other module: on an older Node.js they fail with errors that do not say why.
  const old = nodeTooOld();
  if (old) {
    process.stderr.write(`kpng: ${old}\n`);
    process.exit(1);
  }
  compileCache = enableCompileCache();
  deferOptimizingCompilersFor(process.argv.slice(2));
}

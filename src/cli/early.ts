// Imported first by main.ts, for what must happen before any other module loads: V8's optimizing
// compilers are deferred here (util/jit.ts), because Node's own module loader gets hot and is
// optimized while kpng's modules load (a compiler turned off later still had its ~8 MiB of machine
// code paged in). Only when kpng is the process (bin/kpng.js or cli/main.js), never for a library
// user or a test that imports main.
import { deferOptimizingCompilersFor } from '../util/jit';

const entry = require.main?.filename ?? '';
if (/[/\\](bin[/\\]kpng\.js|cli[/\\]main\.js)$/.test(entry)) deferOptimizingCompilersFor(process.argv.slice(2));

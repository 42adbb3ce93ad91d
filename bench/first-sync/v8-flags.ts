// Imported first by child.ts: applies $KPNG_BENCH_V8_FLAGS with v8.setFlagsFromString before the
// rest of the child loads, the way kpng itself could set V8 flags at start without a re-exec.
import * as v8 from 'node:v8';

const flags = process.env.KPNG_BENCH_V8_FLAGS ?? '';
if (flags) v8.setFlagsFromString(flags);

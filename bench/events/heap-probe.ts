// Preloaded into the kpng child by the events benchmark (node --require): prints the V8 heap in
// use once a second on stderr, next to kpng's own stats lines ("heap: <bytes used> <bytes total>").
const timer = setInterval(() => {
  const m = process.memoryUsage();
  process.stderr.write(`heap: ${m.heapUsed} ${m.heapTotal}\n`);
}, 1000);
timer.unref();

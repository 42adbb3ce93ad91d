#!/usr/bin/env node
// Writes Node's compile cache of every kpng module (and what they load) into DIR, for the image to
// ship: a node's first start then reads bytecode instead of compiling, and the DaemonSets' read-only
// root filesystem is no obstacle (the cache is only read at run time). Run it where kpng runs from, with
// the Node that runs it: entries are keyed by each file's path and content and by V8's flags, so it
// sets the flags a kpng start sets (src/util/jit.ts) before loading anything.
//
//   node hack/image/warm-compile-cache.js DIR KPNG_ROOT     e.g. /var/cache/kpng/compile-cache /opt/kpng
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const nodeModule = require('node:module');

const [dir, root] = process.argv.slice(2);
if (!dir || !root) {
  process.stderr.write('usage: warm-compile-cache.js DIR KPNG_ROOT\n');
  process.exit(2);
}
fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
const r = nodeModule.enableCompileCache(dir);
const ok = [nodeModule.constants.compileCacheStatus.ENABLED, nodeModule.constants.compileCacheStatus.ALREADY_ENABLED];
if (!ok.includes(r.status)) {
  process.stderr.write(`warm-compile-cache: the compile cache is off: ${r.message ?? r.status}\n`);
  process.exit(1);
}
// As a DaemonSet starts kpng (kube-proxy's command line, nft): the same V8 flags as that start.
require(path.join(root, 'dist/src/util/jit.js')).deferOptimizingCompilersFor([]);

/** Every module of kpng itself; loading them loads the dependencies they import. */
function modules(d) {
  return fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(d, e.name);
    if (e.isDirectory()) return modules(p);
    return e.name.endsWith('.js') && !e.name.endsWith('.test.js') ? [p] : [];
  });
}
let loaded = 0;
for (const m of modules(path.join(root, 'dist/src'))) {
  require(m);
  loaded++;
}
// Loaded on demand at run time (lazy requires): YAML for config files and dumps, the kube client.
require(path.join(root, 'dist/src/util/lazy-yaml.js')).yaml();
nodeModule.flushCompileCache();
const files = fs.readdirSync(dir, { recursive: true }).length;
process.stdout.write(`warm-compile-cache: ${loaded} kpng modules and their dependencies compiled into ${dir} (${files} entries)\n`);

#!/usr/bin/env node
// Prints jest's totals as one plain closing line ("tests: N passed, N failed, N skipped") from one or
// more --json outputs (the host run, the qemu guest's), and exits non-zero when anything failed, a
// result file is missing or nothing ran.
'use strict';
const fs = require('node:fs');
let passed = 0, failed = 0, skipped = 0, ok = true;
const missing = [];
for (const file of process.argv.slice(2)) {
  let r;
  try {
    r = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    missing.push(`no jest results in ${file}: ${e.message}`);
    failed++;
    ok = false;
    continue;
  }
  passed += r.numPassedTests;
  failed += r.numFailedTests + (r.numRuntimeErrorTestSuites || 0);
  skipped += r.numPendingTests + (r.numTodoTests || 0);
  if (!r.success) ok = false;
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped${missing.length ? ` (${missing.join('; ')})` : ''}`);
process.exit(failed > 0 || passed === 0 || !ok ? 1 : 0);

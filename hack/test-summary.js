#!/usr/bin/env node
// Prints jest's totals as one plain closing line ("tests: N passed, N failed, N skipped")
// from its --json output, and exits non-zero when anything failed or nothing ran.
'use strict';
const fs = require('node:fs');
const file = process.argv[2];
let r;
try {
  r = JSON.parse(fs.readFileSync(file, 'utf8'));
} catch (e) {
  console.log(`tests: 0 passed, 1 failed (no jest results in ${file}: ${e.message})`);
  process.exit(1);
}
const failed = r.numFailedTests + (r.numRuntimeErrorTestSuites || 0);
console.log(`tests: ${r.numPassedTests} passed, ${failed} failed, ${r.numPendingTests + (r.numTodoTests || 0)} skipped`);
process.exit(failed > 0 || r.numPassedTests === 0 || !r.success ? 1 : 0);

#!/usr/bin/env node
'use strict';
require('../dist/src/cli/main.js').main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e) => { process.stderr.write(`kpng: ${e && e.stack ? e.stack : String(e)}\n`); process.exitCode = 1; },
);

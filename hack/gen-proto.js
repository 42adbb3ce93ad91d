#!/usr/bin/env node
// Generates src/gen/localv1.{js,d.ts} from proto/*.proto with protobufjs-cli
// (static code: fast encode/decode and TypeScript declarations). Skips the work when
// the outputs are newer than every input.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const protos = fs.readdirSync(path.join(root, 'proto')).filter((f) => f.endsWith('.proto')).map((f) => path.join(root, 'proto', f));
const outDir = path.join(root, 'src', 'gen');
const js = path.join(outDir, 'proto.js');
const dts = path.join(outDir, 'proto.d.ts');
const bin = (n) => path.join(root, 'node_modules', '.bin', n);

if (process.argv.includes('--copy-dist')) {
  // tsc does not copy the generated JavaScript: put it beside the compiled sources.
  const dist = path.join(root, 'dist', 'src', 'gen');
  fs.mkdirSync(dist, { recursive: true });
  for (const f of [js, dts]) fs.copyFileSync(f, path.join(dist, path.basename(f)));
  process.exit(0);
}

const newest = Math.max(...protos.map((p) => fs.statSync(p).mtimeMs), fs.statSync(__filename).mtimeMs);
if (fs.existsSync(js) && fs.existsSync(dts) && fs.statSync(js).mtimeMs > newest && fs.statSync(dts).mtimeMs > newest) process.exit(0);

fs.mkdirSync(outDir, { recursive: true });
execFileSync(bin('pbjs'), ['-t', 'static-module', '-w', 'commonjs', '--force-number', '--no-delimited', '-o', js, ...protos], { stdio: 'inherit' });
execFileSync(bin('pbts'), ['-o', dts, js], { stdio: 'inherit' });
console.log(`generated ${path.relative(root, js)} and ${path.relative(root, dts)} from ${protos.length} proto file(s)`);

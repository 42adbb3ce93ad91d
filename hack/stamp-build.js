#!/usr/bin/env node
// Writes dist/src/build-stamp.json: the commit, tree state and date of this build, which
// `kpng --version=raw` and kubernetes_build_info report as a Kubernetes build reports its own.
// Outside a git checkout (a source tarball) the commit and tree state stay empty, as in an
// unstamped Kubernetes build. SOURCE_DATE_EPOCH (seconds) sets the date, for reproducible builds.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const git = (...args) => {
  try { return execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(); } catch { return undefined; }
};
const commit = git('rev-parse', 'HEAD');
// Only what git tracks decides: build outputs and caches are ignored files.
const dirty = commit === undefined ? undefined : git('status', '--porcelain', '--untracked-files=no');
const epoch = Number(process.env.SOURCE_DATE_EPOCH);
const stamp = {
  gitCommit: commit ?? '',
  gitTreeState: dirty === undefined ? '' : dirty === '' ? 'clean' : 'dirty',
  buildDate: new Date(Number.isFinite(epoch) && epoch > 0 ? epoch * 1000 : Date.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
};
const out = path.join(root, 'dist', 'src', 'build-stamp.json');
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, `${JSON.stringify(stamp)}\n`);

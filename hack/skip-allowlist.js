// The skip allow-list (test/skip-allowlist.json): the only skipped tests `make test` accepts, each with
// the reason this machine cannot run it. Read by hack/test-summary.js (which fails on any other skip)
// and by test/helpers/gate.ts (whose gates fail, rather than skip, under KPNG_TEST_STRICT=1 unless the
// block is listed here). Plain JS so that the summary runs without a build.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const DEFAULT_FILE = path.join(ROOT, 'test', 'skip-allowlist.json');

/**
 * @typedef {{ file: string, test: string, reason: string }} AllowEntry
 *   file: the test file, relative to the repository (the source's name, also for the guest's dist/ copies);
 *   test: a regular expression matched against the test's full name (describe titles and title, joined
 *   by spaces, as jest's fullName) or, by a gate, against the gated block's title;
 *   reason: why this machine cannot run it (a kernel feature it lacks, ...).
 */

/** The allow-list's path: KPNG_SKIP_ALLOWLIST (tests of the summary itself point it elsewhere), else the repository's. */
function allowlistPath(env = process.env) {
  return env.KPNG_SKIP_ALLOWLIST || DEFAULT_FILE;
}

/**
 * Parses and checks an allow-list's text; throws naming the first bad entry, so that a list with an
 * entry without its reason (or a pattern that does not compile) never lets a skip through.
 * @param {string} text
 * @returns {AllowEntry[]}
 */
function parseAllowlist(text) {
  const doc = JSON.parse(text);
  const entries = doc && Array.isArray(doc.entries) ? doc.entries : undefined;
  if (!entries) throw new Error('the skip allow-list must be an object with an "entries" array');
  entries.forEach((e, i) => {
    for (const k of ['file', 'test', 'reason']) {
      if (typeof e?.[k] !== 'string' || e[k].trim() === '') throw new Error(`skip allow-list entry ${i}: "${k}" must be a non-empty string`);
    }
    try { new RegExp(e.test); } catch (err) { throw new Error(`skip allow-list entry ${i}: "test" is not a regular expression: ${err.message}`); }
  });
  return entries;
}

/** @returns {AllowEntry[]} the list at allowlistPath(); an absent file is an empty list. */
function loadAllowlist(file = allowlistPath()) {
  let text;
  try { text = fs.readFileSync(file, 'utf8'); } catch (e) {
    if (e.code === 'ENOENT') return [];
    throw e;
  }
  return parseAllowlist(text);
}

/**
 * A test file's name as the allow-list writes it: relative to the repository, and for the qemu guest's
 * compiled copies (dist/**.js) the TypeScript source they come from.
 */
function sourceName(file, root = ROOT) {
  let rel = path.isAbsolute(file) ? path.relative(root, file) : file;
  rel = rel.split(path.sep).join('/');
  const m = /^dist\/(.*)\.js$/.exec(rel);
  return m ? `${m[1]}.ts` : rel;
}

/** The entry that allows skipping `name` (a full test name or a block title) in `file`, if any. */
function allowedBy(entries, file, name, root = ROOT) {
  const src = sourceName(file, root);
  return entries.find((e) => e.file === src && new RegExp(e.test).test(name));
}

module.exports = { ROOT, allowlistPath, parseAllowlist, loadAllowlist, sourceName, allowedBy };

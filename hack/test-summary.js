#!/usr/bin/env node
// Closes `make test` from one or more jest --json outputs (the host run, the qemu guest's, the image's):
// names every skipped and failed test, then prints the totals as one plain line ("tests: N passed,
// N failed, N skipped"). Exits non-zero when anything failed, a result file is missing, nothing ran,
// or a test was skipped that test/skip-allowlist.json does not list with its reason: a machine where a
// whole backend's tests vanish must not look green.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { ROOT, allowlistPath, loadAllowlist, allowedBy, sourceName } = require('./skip-allowlist');

const NOT_RUN = new Set(['pending', 'skipped', 'todo', 'disabled']);

/** "describe › test" for people; jest's fullName (space-joined) is what allow-list patterns match. */
function displayName(a) {
  return [...(a.ancestorTitles || []), a.title].join(' › ');
}

/**
 * @param {Array<{ path: string, result?: any, error?: string }>} inputs one per results file: its
 *   parsed JSON, or why it could not be read
 * @param {import('./skip-allowlist').AllowEntry[]} entries the allow-list
 * @param {string} allowlistName how to name the allow-list in messages
 * @returns {{ lines: string[], code: 0 | 1 }}
 */
function summarise(inputs, entries, allowlistName = 'test/skip-allowlist.json', root = ROOT) {
  let passed = 0, failed = 0, skipped = 0, ok = true;
  const missing = [], failures = [], notAllowed = [], allowed = [];
  for (const { path: file, result: r, error } of inputs) {
    if (!r) {
      missing.push(`no jest results in ${file}: ${error}`);
      failed++;
      ok = false;
      continue;
    }
    passed += r.numPassedTests || 0;
    failed += (r.numFailedTests || 0) + (r.numRuntimeErrorTestSuites || 0);
    const fileSkips = (r.numPendingTests || 0) + (r.numTodoTests || 0);
    skipped += fileSkips;
    if (!r.success) ok = false;
    let named = 0;
    for (const suite of r.testResults || []) {
      const src = sourceName(suite.name || '?', root);
      const results = suite.assertionResults || [];
      if (suite.status === 'failed' && !results.some((a) => a.status === 'failed')) {
        // The file did not run at all (a throw at load, a syntax error): jest names no test in it.
        const why = String(suite.message || '').split('\n').map((l) => l.trim()).find((l) => l && !/Test suite failed to run/.test(l));
        failures.push(`${src}: failed to run: ${why || 'no message'}`);
      }
      for (const a of results) {
        if (a.status === 'failed') failures.push(`${src} › ${displayName(a)}`);
        if (!NOT_RUN.has(a.status)) continue;
        named++;
        const full = a.fullName || [...(a.ancestorTitles || []), a.title].join(' ');
        const entry = allowedBy(entries, suite.name || '?', full, root);
        if (entry) allowed.push(`${src} › ${displayName(a)} (${entry.reason})`);
        else notAllowed.push(`${src} › ${displayName(a)}`);
      }
    }
    // A results file that counts skips without naming them (not jest's own output) cannot be checked.
    if (fileSkips > named) notAllowed.push(`${file}: ${fileSkips - named} skipped test(s) it does not name`);
  }
  const lines = [];
  const list = (title, items) => { if (items.length) lines.push(title, ...items.map((i) => `  ${i}`)); };
  list('failed:', failures);
  list(`skipped, allowed by ${allowlistName}:`, allowed);
  list(`skipped, NOT on ${allowlistName} (run them, or list them there with the reason this machine cannot):`, notAllowed);
  lines.push(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped${allowed.length ? ` (${allowed.length} allowed)` : ''}${missing.length ? ` (${missing.join('; ')})` : ''}`);
  const code = failed > 0 || passed === 0 || !ok || notAllowed.length > 0 ? 1 : 0;
  return { lines, code };
}

function readInput(file) {
  try {
    return { path: file, result: JSON.parse(fs.readFileSync(file, 'utf8')) };
  } catch (e) {
    return { path: file, error: e.message };
  }
}

function main(argv) {
  const listFile = allowlistPath();
  const listName = path.relative(process.cwd(), listFile) || listFile;
  let entries;
  try {
    entries = loadAllowlist(listFile);
  } catch (e) {
    console.log(`tests: ${listName} is not a valid skip allow-list: ${e.message}`);
    return 1;
  }
  const { lines, code } = summarise(argv.map(readInput), entries, listName);
  for (const l of lines) console.log(l);
  return code;
}

if (require.main === module) process.exit(main(process.argv.slice(2)));

module.exports = { summarise, main };

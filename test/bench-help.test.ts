// Every bench an npm script runs answers --help with its usage and exits at once, starting nothing
// (before, most ignored --help and ran for minutes, and bench:api died on an unknown option).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { headerComment, sourceOf } from '../bench/help';

const root = path.join(__dirname, '..');
const scripts = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts as Record<string, string>;
/** The compiled bench each bench:* (and soak) script runs, and every bench/*.bench.ts. */
const benches = [...new Set([
  ...Object.entries(scripts)
    .filter(([name]) => name.startsWith('bench:') || name === 'soak')
    .map(([, cmd]) => /dist\/bench\/\S+\.js/.exec(cmd)?.[0])
    .filter((f): f is string => !!f),
  ...readdirSync(path.join(root, 'bench')).filter((f) => f.endsWith('.bench.ts')).map((f) => `dist/bench/${f.replace(/\.ts$/, '.js')}`),
])];

test('the header comment is the usage; dist/bench/x.js reads bench/x.ts', () => {
  expect(headerComment('// one\n//   two\n//\nimport x;\n// not this\n')).toBe('one\n  two\n\n');
  expect(headerComment('import x;\n')).toBe('');
  expect(sourceOf('/r/dist/bench/vs-upstream/run.js')).toBe('/r/bench/vs-upstream/run.ts');
});

test.each(benches)('node %s --help prints its usage and exits 0', (file) => {
  const r = spawnSync(process.execPath, [path.join(root, file), '--help'], { cwd: root, encoding: 'utf8', timeout: 30_000 });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  const usage = headerComment(readFileSync(sourceOf(path.join(root, file)), 'utf8'));
  expect(usage.length).toBeGreaterThan(80);
  expect(r.stdout).toBe(usage);
});

test('there are benches to check', () => expect(benches.length).toBeGreaterThanOrEqual(13));

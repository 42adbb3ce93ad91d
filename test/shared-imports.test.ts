// Benches run without jest: what they import (test/shared/, the nft lab, test helpers) must not need
// it. Follows the relative imports from every bench and every test/shared module and checks that none
// of the files reached uses jest or a gate.
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const JEST = /(?<![.\w])(describe|it|test|expect|beforeAll|afterAll|beforeEach|afterEach)\(|(?<![.\w])jest\.|@jest\/|from ['"][^'"]*helpers\/gate['"]/;
/** A file's code without its whole-line comments. */
const code = (f: string): string => fs.readFileSync(f, 'utf8').split('\n').filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l)).join('\n');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.ts$/.test(e.name) && !/\.test\.ts$/.test(e.name) ? [p] : [];
  });
}

function reached(starts: string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...starts];
  while (todo.length) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const m of fs.readFileSync(f, 'utf8').matchAll(/(?:from|import\(|require\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const base = path.resolve(path.dirname(f), m[1]);
      const hit = [`${base}.ts`, path.join(base, 'index.ts')].find((c) => fs.existsSync(c));
      if (hit && !hit.includes(`${path.sep}src${path.sep}`)) todo.push(hit);
    }
  }
  return seen;
}

test('benches and test/shared import nothing that needs jest', () => {
  const shared = sources(path.join(ROOT, 'test', 'shared'));
  expect(shared.map((f) => path.basename(f)).sort()).toEqual(['kpng-process.ts', 'kpng-trace.ts', 'netlab.ts', 'objects.ts']);
  const files = reached([...sources(path.join(ROOT, 'bench')), ...shared]);
  const offending = [...files].filter((f) => JEST.test(code(f))).map((f) => path.relative(ROOT, f));
  expect(offending).toEqual([]);
});

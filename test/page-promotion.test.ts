// promoteWholePagesOnLargeHeaps (src/util/memory.ts) in a fresh Node process each (V8 flags are
// process-wide), read through V8's own --trace-evacuation: once the heap is large, major GCs move
// young pages to the old generation whole and copy none; with V8's default (the user's flag wins)
// they copy the live objects out of most of them. Runs the built module (dist/, `make build`).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { nodeBinary, repoRoot } from './shared/kpng-process';

const MEMORY_JS = path.join(repoRoot(), 'dist', 'src', 'util', 'memory.js');

interface Evacuations { installed: boolean; switches: string[]; copiedBefore: number; copiedAfter: number; promotedAfter: number; copied: number }

/** A heap of ~100 MiB, then young objects of which half survive, through a few major GCs. */
function run(nodeArgs: string[] = []): Evacuations {
  const script = `
    const { promoteWholePagesOnLargeHeaps } = require(${JSON.stringify(MEMORY_JS)});
    const stop = promoteWholePagesOnLargeHeaps((p) => console.log('switch ' + p));
    console.log('installed ' + !!stop);
    const keep = [];
    for (let i = 0; i < 1200000; i++) keep.push({ a: i, b: 's' + i });
    let tick = 0;
    const step = () => {
      const young = [];
      for (let i = 0; i < 200000; i++) { const o = { i, x: [i] }; if (i & 1) young.push(o); }
      keep.push(young);
      if (++tick < 30) setImmediate(step); else stop?.();
    };
    setImmediate(step);`;
  const r = spawnSync(nodeBinary(), ['--trace-evacuation', ...nodeArgs, '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
  const out: Evacuations = { installed: false, switches: [], copiedBefore: 0, copiedAfter: 0, promotedAfter: 0, copied: 0 };
  let after = false;
  for (const line of r.stdout.split('\n')) {
    if (line === 'installed true') out.installed = true;
    const sw = /^switch (\S+)/.exec(line);
    if (sw) { out.switches.push(sw[1]!); after = sw[1] === 'whole-pages'; }
    // A young page whose live objects were copied out, or one moved whole.
    if (/new_space=1 page_evacuation=0/.test(line)) { out.copied++; if (after) out.copiedAfter++; else out.copiedBefore++; }
    if (/page_evacuation=1/.test(line) && after) out.promotedAfter++;
  }
  return out;
}

describe('promoteWholePagesOnLargeHeaps', () => {
  beforeAll(() => {
    if (!fs.existsSync(MEMORY_JS)) throw new Error(`${MEMORY_JS} is missing: run \`make build\``);
  });

  test('once the heap is large, major GCs move young pages whole and copy none', () => {
    const r = run();
    expect(r.installed).toBe(true);
    expect(r.switches).toEqual(['whole-pages']);
    expect(r.promotedAfter).toBeGreaterThan(50);
    expect(r.copiedAfter).toBe(0);
  });

  test("V8's default copies most young pages; a page-promotion flag on the command line is the user's choice", () => {
    const r = run(['--page-promotion-threshold=70']);
    expect(r.installed).toBe(false);
    expect(r.switches).toEqual([]);
    expect(r.copied).toBeGreaterThan(50);
  });
});

// limitYoungGeneration (src/util/memory.ts) in a fresh Node process each (V8 flags are
// process-wide): set at run time, it keeps the young generation from growing under a burst of
// surviving allocations (as the first lists make; 32 MiB without it, a few MiB with it); a
// semi-space flag of the user's wins. Runs the
// built module (dist/, `make build`).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { nodeBinary, repoRoot } from './shared/kpng-process';

const MEMORY_JS = path.join(repoRoot(), 'dist', 'src', 'util', 'memory.js');

/** Peak committed young generation (MiB) during the burst, and what limitYoungGeneration returned. */
function burst(limit: boolean, nodeArgs: string[] = []): { limited: boolean; peakNewMiB: number } {
  const script = `
    const v8 = require('node:v8');
    const limited = ${limit} ? require(${JSON.stringify(MEMORY_JS)}).limitYoungGeneration() : false;
    const newSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
    let keep = [], peak = 0;
    for (let i = 0; i < 2000000; i++) {
      keep.push({ i, s: 'x' + i });
      if (keep.length > 300000) keep = [];
      if (i % 10000 === 0) peak = Math.max(peak, newSpace());
    }
    process.stdout.write(JSON.stringify({ limited, peakNewMiB: peak / 2 ** 20 }));`;
  const r = spawnSync(nodeBinary(), [...nodeArgs, '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { limited: boolean; peakNewMiB: number };
}

describe('limitYoungGeneration', () => {
  beforeAll(() => {
    if (!fs.existsSync(MEMORY_JS)) throw new Error(`${MEMORY_JS} is missing: run \`make build\``);
  });

  test('set at run time, it keeps the young generation at its initial size; without it V8 grows it', () => {
    const grown = burst(false);
    const kept = burst(true);
    expect(kept.limited).toBe(true);
    expect(grown.peakNewMiB).toBeGreaterThanOrEqual(16);
    // It starts at 2 MiB and stays near it (V8 still adds a few pages now and then: up to ~9 MiB seen).
    expect(kept.peakNewMiB).toBeLessThan(grown.peakNewMiB / 2);
  });

  test("a semi-space flag on the node command line is the user's choice: left alone", () => {
    const r = burst(true, ['--semi-space-growth-factor=2']);
    expect(r.limited).toBe(false);
    expect(r.peakNewMiB).toBeGreaterThanOrEqual(16);
  });
});

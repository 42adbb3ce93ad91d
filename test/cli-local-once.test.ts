// `kpng local --once` against a server that is not there ends with an error instead of waiting forever.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runKpng } from './helpers/cli';

test('kpng local --once exits 1 with a clear error when the API server cannot be reached', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-local-once-'));
  try {
    const sock = path.join(dir, 'absent.sock');
    const r = runKpng(['local', '--api', `unix://${sock}`, '--node', 'n1', '--once'], { timeoutMs: 60_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot follow node n1 on unix://${sock}`);
    expect(r.stderr).toContain('gave up after 5 attempts');
    expect(r.stdout).toBe('');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);

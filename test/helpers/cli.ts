// Runs the built `kpng` command (npm run build first; `make test` does).
import { spawnSync } from 'node:child_process';
import { ensureBuilt, KPNG, killAllKpng } from '../shared/kpng-process';

export { KPNG, KpngProcess, ROOT, withTestServers, type KpngProcessOptions } from '../shared/kpng-process';

// A test file that failed half-way leaves no kpng running behind it.
afterAll(killAllKpng);

export function runKpng(args: string[], opts: { timeoutMs?: number } = {}) {
  ensureBuilt();
  const r = spawnSync(process.execPath, [KPNG, ...args], { encoding: 'utf8', timeout: opts.timeoutMs ?? 30000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// The host's kube-apiserver (hack/cluster/up.sh started it; its pid in $state/pids/kube-apiserver):
// killed with SIGKILL and started again with the same command line, as a crashed API server that its
// supervisor restarts. The new pid goes where down.sh looks for it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Cluster, run, sleep, startDetached, until } from './cluster';

function pidFile(c: Cluster): string {
  return path.join(c.state, 'pids', 'kube-apiserver');
}

export async function apiReady(c: Cluster): Promise<boolean> {
  const pki = path.join(c.state, 'pki');
  const r = await run('curl', ['-sf', '-m', '2', '--cacert', `${pki}/ca.crt`, '--cert', `${pki}/admin.crt`, '--key', `${pki}/admin.key`, `${c.plan.apiServer}/readyz`], { allowFail: true });
  return r.code === 0;
}

/** SIGKILL; resolves with its command line once it is gone. */
export async function killApiServer(c: Cluster): Promise<string[]> {
  const pid = Number(fs.readFileSync(pidFile(c), 'utf8'));
  const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  if (!argv[0]?.endsWith('kube-apiserver')) throw new Error(`pid ${pid} (${pidFile(c)}) is ${argv[0]}, not kube-apiserver`);
  process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 100 && fs.existsSync(`/proc/${pid}`); i++) await sleep(50);
  return argv;
}

/** Started again; resolves with the time (seconds since the epoch) /readyz first answered. */
export async function startApiServer(c: Cluster, argv: string[]): Promise<number> {
  const pid = startDetached(argv, path.join(c.state, 'logs', 'kube-apiserver.log'));
  fs.writeFileSync(pidFile(c), `${pid}\n`);
  const ready = await until(() => apiReady(c), 120_000, 100);
  if (ready === undefined) throw new Error('kube-apiserver not ready 120 s after its restart');
  return ready;
}

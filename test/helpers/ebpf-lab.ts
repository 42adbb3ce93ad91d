// The jest set-up of a describe that runs `kpng --to ebpf` in a lab (test/e2e/ebpf*.test.ts): the lab
// made in beforeAll, and on every path kpng stopped and the lab destroyed, with what it made checked
// gone; kpng's log printed after a test that failed. Then the pods' servers and the clients.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { NODE, ROOT, type KpngProcess } from '../shared/kpng-process';
import { nsPath, type NetLab } from '../shared/netlab';

/** A lab: destroy() removes everything it made (namespaces, cgroups, pins, processes). */
export interface EbpfLabLike { destroy(): Promise<void> }

export interface EbpfLabHooks {
  /** Makes the lab and, when the suite starts it now, kpng (the describe keeps both in its own variables). */
  setUp: () => Promise<void>;
  /** The lab and kpng of the moment (a test may have restarted kpng); undefined when not made. */
  lab: () => EbpfLabLike | undefined;
  kpng: () => KpngProcess | undefined;
  /** Paths that must be gone once the lab is destroyed (its pin directory, its cgroups). */
  removed?: () => string[];
}

/** Registers the describe's beforeAll, afterAll and afterEach. */
export function useEbpfLab(h: EbpfLabHooks): void {
  const tearDown = async (): Promise<void> => {
    await h.kpng()?.stop();
    await h.lab()?.destroy();
  };

  beforeAll(async () => {
    try {
      await h.setUp();
    } catch (e) {
      await tearDown();
      throw e;
    }
  }, 60000);

  afterAll(async () => {
    await tearDown();
    if (h.lab()) for (const p of h.removed?.() ?? []) expect(fs.existsSync(p)).toBe(false);
  }, 30000);

  afterEach(() => {
    const s = expect.getState();
    // eslint-disable-next-line no-console
    if (s.assertionCalls !== s.numPassingAsserts) console.log(`kpng log:\n${h.kpng()?.log}`);
  });
}

// ---- Pods and clients of an eBPF lab ----

const E2E = path.join(ROOT, 'test', 'e2e');
/** One line per connection: the pod's name (test/e2e/lab/echo-server.js NAME PORTS). */
export const ECHO_SERVER = path.join(E2E, 'lab', 'echo-server.js');
/** Long-lived connections answered line by line (test/e2e/ipvs/stream.js server NAME PORT). */
export const STREAM_SERVER = path.join(E2E, 'ipvs', 'stream.js');
/** Connects COUNT times and prints one JSON reply a line (test/e2e/ebpf/client.js MODE HOST PORT COUNT). */
export const EBPF_CLIENT = path.join(E2E, 'ebpf', 'client.js');

/** Starts each server script in its namespace (the lab kills it at the end); resolves when all say ready. */
export async function startServers(lab: NetLab, servers: [ns: string, args: string[]][]): Promise<void> {
  for (const [ns, args] of servers) {
    const c = lab.spawnIn(ns, NODE, args);
    await new Promise<void>((resolve, reject) => {
      c.stdout!.on('data', (b) => { if (String(b).includes('ready')) resolve(); });
      c.on('exit', (code) => reject(new Error(`${path.basename(args[0])} in ${ns} exited ${code}`)));
    });
  }
}

/** The replies of client.js run in namespace `ns`; with `cgroup`, as a process of that cgroup (its
 *  connect() and sendmsg() go through the socket LB attached there). */
export function runClient<Reply>(ns: string, args: (string | number)[], cgroup?: string): Promise<Reply[]> {
  const run = `exec nsenter --net=${nsPath(ns)} ${NODE} ${EBPF_CLIENT} ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', cgroup ? `echo $$ > ${cgroup}/cgroup.procs && ${run}` : run], { timeout: 60000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`client failed: ${err.message} ${stderr}`));
      resolve(stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Reply));
    });
  });
}

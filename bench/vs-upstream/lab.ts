// One proxy's network namespace (kbv-<unique id>-<tag>, made by the shared lab fixture,
// test/shared/netlab.ts): loopback up, a path to the API server (forwarder.ts), the generation watcher,
// and the proxy process itself. stop() removes everything, namespace included (which also removes every
// nftables table the proxy made).
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { nodeBinary, repoRoot } from '../../test/shared/kpng-process';
import { NetLab } from '../../test/shared/netlab';
import { GenWatcher, onLines, stopChild } from './kernel';

const live = new Set<Lab>();
process.once('exit', () => { for (const l of live) l.stopSync(); });
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));

export class Lab {
  readonly netns: string;
  readonly gens: GenWatcher;
  proxy?: ChildProcess;
  /** performance.now() when the proxy process was spawned. */
  startedAt = 0;
  readonly stderrTail: string[] = [];
  private forwarder?: ChildProcess;
  private bridge?: net.Server;
  private readonly socketPath: string;
  private readonly net: NetLab;

  private constructor(tag: string) {
    // KPNG_BENCH_NETNS_PREFIX: the namespace prefix of this bench's runs.
    this.net = new NetLab(process.env.KPNG_BENCH_NETNS_PREFIX || 'kbv');
    this.netns = this.net.netns(tag);
    live.add(this);
    this.socketPath = path.join(os.tmpdir(), `${this.netns}-${process.pid}.sock`);
    this.gens = new GenWatcher(this.netns);
  }

  /** A namespace whose 127.0.0.1:<apiPort> leads to the API server at 127.0.0.1:<apiPort> of the host. */
  static async create(tag: string, apiPort: number): Promise<Lab> {
    const lab = new Lab(tag);
    try {
      fs.rmSync(lab.socketPath, { force: true });
      lab.bridge = net.createServer((c) => {
        const up = net.connect(apiPort, '127.0.0.1');
        c.pipe(up).pipe(c);
        const close = () => { c.destroy(); up.destroy(); };
        c.on('error', close); up.on('error', close); c.on('close', close); up.on('close', close);
      });
      await new Promise<void>((resolve, reject) => { lab.bridge!.once('error', reject); lab.bridge!.listen(lab.socketPath, resolve); });
      const fwd = spawn('ip', ['netns', 'exec', lab.netns, nodeBinary(), forwarderScript(), String(apiPort), lab.socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
      lab.forwarder = fwd;
      await new Promise<void>((resolve, reject) => {
        onLines(fwd.stdout!, (l) => { if (l === 'ready') resolve(); });
        fwd.once('exit', (code) => reject(new Error(`forwarder in ${lab.netns} exited (${code})`)));
      });
      return lab;
    } catch (e) {
      lab.stopSync();
      throw e;
    }
  }

  /**
   * Starts the proxy inside the namespace; its stdout/stderr lines are kept (the last 50). `nsenter`:
   * enter only the network namespace (`ip netns exec` also remounts /sys, which hides the cgroup v2
   * and bpffs mounts an eBPF backend uses). `env`: variables set (a string) or removed (undefined)
   * in the proxy's environment, which is this process's otherwise.
   */
  startProxy(argv: string[], nsenter = false, env?: Record<string, string | undefined>): ChildProcess {
    const cmd = nsenter ? ['nsenter', `--net=/var/run/netns/${this.netns}`, ...argv] : ['ip', 'netns', 'exec', this.netns, ...argv];
    let childEnv: NodeJS.ProcessEnv | undefined;
    if (env) {
      childEnv = { ...process.env };
      for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k]; else childEnv[k] = v;
    }
    this.startedAt = performance.now();
    const p = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv });
    this.proxy = p;
    // KPNG_BENCH_PROXY_LOG=DIR: every proxy's whole output also goes to DIR/<netns>.log.
    const logDir = process.env.KPNG_BENCH_PROXY_LOG;
    if (logDir) fs.mkdirSync(logDir, { recursive: true });
    const file = logDir ? fs.createWriteStream(path.join(logDir, `${this.netns}.log`), { flags: 'a' }) : undefined;
    const keep = (l: string) => { file?.write(`${l}\n`); this.stderrTail.push(l); if (this.stderrTail.length > 50) this.stderrTail.shift(); };
    onLines(p.stdout!, keep);
    onLines(p.stderr!, keep);
    return p;
  }

  get proxyRunning(): boolean { return !!this.proxy && this.proxy.exitCode === null && this.proxy.signalCode === null; }

  async stopProxy(): Promise<void> {
    const p = this.proxy;
    if (!p || !this.proxyRunning) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    const t = setTimeout(() => stopChild(p), 5000);
    await exited;
    clearTimeout(t);
  }

  stopSync(): void {
    stopChild(this.proxy);
    stopChild(this.forwarder);
    this.gens?.stop();
    this.bridge?.close();
    fs.rmSync(this.socketPath, { force: true });
    this.net.destroy();
    live.delete(this);
  }

  async stop(): Promise<void> {
    await this.stopProxy();
    this.stopSync();
  }
}

/** forwarder.js beside this module when it runs built, else the built one (tests run this module from
 *  its TypeScript source through ts-jest). */
function forwarderScript(): string {
  const here = path.join(__dirname, 'forwarder.js');
  return fs.existsSync(here) ? here : path.join(repoRoot(), 'dist', 'bench', 'vs-upstream', 'forwarder.js');
}

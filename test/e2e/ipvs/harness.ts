// The IPVS e2e harness (inside the qemu guest): the real `kpng file ... --to ipvs` on the lab's node
// n1, long-lived TCP connections, and an independent look at the kernel (ipvsadm, ip, nft; tests only).
import * as path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { NODE_BIN, type Lab } from '../lab/lab';

const SRC = __dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`);
const ROOT = path.resolve(SRC, '../../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
export const STREAM = path.join(SRC, 'stream.js');

export class KpngIpvs {
  private lines: string[] = [];
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  constructor(readonly lab: Lab, readonly file: string, readonly extra: string[] = []) {}

  async start(): Promise<void> {
    const before = this.syncs;
    const args = [CLI, 'file', '--input', this.file, '--node', 'n1', '--to', 'ipvs', '--min-sync-period', '200ms',
      '--cluster-cidr', '10.244.0.0/16', '--cluster-cidr', 'fd00:244::/32', '--ipvs-drain-check', '1s', ...this.extra];
    const child = this.lab.spawnIn(this.lab.ns.n1, NODE_BIN, args);
    this.child = child;
    const onData = (d: Buffer) => { this.lines.push(...String(d).split('\n').filter(Boolean)); };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    this.exited = new Promise<void>((r) => child.on('exit', () => r()));
    await this.waitSyncs(before + 1, 60000);
  }

  async stop(): Promise<void> {
    this.child?.kill('SIGTERM');
    await this.exited;
    this.child = undefined;
  }

  get log(): string { return this.lines.join('\n'); }

  /** Successful syncs logged by the kernel sink. */
  get syncs(): number { return this.lines.filter((l) => /ipvs: revision \d+: .* sync, /.test(l)).length; }

  async waitSyncs(n: number, timeoutMs = 30000): Promise<void> {
    const t0 = Date.now();
    while (this.syncs < n) {
      if (this.lines.some((l) => /sync failed/.test(l))) throw new Error(`kpng sync failed; log:\n${this.log}`);
      if (Date.now() - t0 > timeoutMs) throw new Error(`kpng did not sync ${n} times in ${timeoutMs} ms; log:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async waitLog(re: RegExp, timeoutMs = 30000): Promise<void> {
    const t0 = Date.now();
    while (!this.lines.some((l) => re.test(l))) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`no log line matching ${re} in ${timeoutMs} ms; log:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** One TCP connection from a namespace, driven line by line. */
export class StreamClient {
  private events: Array<Record<string, unknown>> = [];
  private readonly child: ChildProcess;

  private constructor(lab: Lab, ns: string, host: string, port: number) {
    this.child = lab.spawnIn(ns, NODE_BIN, [STREAM, 'client', host, String(port)]);
    let buf = '';
    this.child.stdout!.on('data', (d) => {
      buf += d;
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) this.events.push(JSON.parse(buf.slice(0, i)));
    });
  }

  static async open(lab: Lab, ns: string, host: string, port: number): Promise<StreamClient> {
    const c = new StreamClient(lab, ns, host, port);
    await c.next((e) => 'connected' in e || 'error' in e || 'closed' in e, 'connect');
    if (!c.events.some((e) => 'connected' in e)) throw new Error(`stream connect to ${host}:${port} failed: ${JSON.stringify(c.events)}`);
    return c;
  }

  private async next(pred: (e: Record<string, unknown>) => boolean, what: string, from = 0, timeoutMs = 8000): Promise<Record<string, unknown>> {
    const t0 = Date.now();
    for (;;) {
      const e = this.events.slice(from).find(pred);
      if (e) return e;
      if (Date.now() - t0 > timeoutMs) throw new Error(`stream: no ${what} in ${timeoutMs} ms: ${JSON.stringify(this.events)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Sends a line; resolves with the server's reply (its name and the peer address it saw). */
  async ping(): Promise<{ name: string; peer: string }> {
    const from = this.events.length;
    this.child.stdin!.write('ping\n');
    const e = await this.next((x) => 'reply' in x || 'closed' in x || 'error' in x, 'reply', from);
    if (!('reply' in e)) throw new Error(`stream: ${JSON.stringify(e)}`);
    return e.reply as { name: string; peer: string };
  }

  /** Aborts the connection with a TCP reset (IPVS then forgets it within seconds). */
  async reset(): Promise<void> {
    const from = this.events.length;
    this.child.stdin!.write('reset\n');
    await this.next((x) => 'closed' in x, 'close', from);
  }
}

/** One datagram from a connected UDP socket in a namespace: {ok} or {ok: false, err: 'ECONNREFUSED' | 'timeout'}. */
export function udpConnected(lab: Lab, ns: string, host: string, port: number): { ok: boolean; err?: string } {
  return JSON.parse(lab.exec(ns, NODE_BIN, [STREAM, 'udp', host, String(port)]).trim()) as { ok: boolean; err?: string };
}

/** `ipvsadm -Ln` inside a namespace (inspection only). */
export function ipvsadm(lab: Lab, ns: string, ...args: string[]): string {
  return lab.exec(ns, 'ipvsadm', ['-Ln', ...args]);
}

/** Real servers of one virtual server as "addr:port weight" ("[addr]:port weight" for IPv6), from ipvsadm. */
export function realServers(lab: Lab, ns: string, proto: 'tcp' | 'udp', vip: string): string[] {
  const text = ipvsadm(lab, ns, proto === 'tcp' ? '-t' : '-u', vip);
  return text.split('\n').filter((l) => /->\s+[\d[]/.test(l)).map((l) => { const f = l.trim().split(/\s+/); return `${f[1]} ${f[3]}`; }).sort();
}

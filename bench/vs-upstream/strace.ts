// The netlink pass: strace attached to the proxy (threads and the children it starts) for a while,
// summing what goes over its netlink sockets. strace slows the process down a lot, so only bytes and
// messages are taken from this pass, never time or CPU.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export interface NetlinkFigures {
  seconds: number;
  sentBytes: number;
  /** netlink messages (nlmsghdr) sent, batch begin/end included. */
  sentMessages: number;
  receivedBytes: number;
  /** Kernel transactions in the same window (filled in by the caller). */
  transactions: number;
}

const SEND = new Set(['sendmsg', 'sendto', 'write', 'writev']);
const CALL = /^(\d+)\s+(sendmsg|sendto|recvmsg|recvfrom|write|writev|read)\((\d+)<NETLINK:/;
const RESUMED = /^(\d+)\s+<\.\.\. (\w+) resumed>/;
const RET = / = (\d+)$/;

/** Parses `strace -f -yy` output: what went over NETLINK sockets. */
export function parseStrace(text: string, seconds: number): NetlinkFigures {
  const r: NetlinkFigures = { seconds, sentBytes: 0, sentMessages: 0, receivedBytes: 0, transactions: 0 };
  const pending = new Map<string, { send: boolean; messages: number }>();
  const account = (send: boolean, messages: number, line: string) => {
    const ret = RET.exec(line);
    if (!ret) return;
    if (send) { r.sentBytes += Number(ret[1]); r.sentMessages += messages; } else r.receivedBytes += Number(ret[1]);
  };
  for (const line of text.split('\n')) {
    const m = CALL.exec(line);
    if (m) {
      const send = SEND.has(m[2]);
      const messages = send ? (line.match(/nlmsg_len=/g)?.length ?? 0) : 0;
      if (line.endsWith('<unfinished ...>')) pending.set(m[1], { send, messages });
      else account(send, messages, line);
      continue;
    }
    const res = RESUMED.exec(line);
    if (res) {
      const p = pending.get(res[1]);
      if (p) { pending.delete(res[1]); account(p.send, p.messages, line); }
    }
  }
  return r;
}

/** Attaches strace to `pid` for `seconds`, then parses its output. */
export function stracePass(pid: number, seconds: number): Promise<NetlinkFigures> {
  const file = path.join(os.tmpdir(), `kbv-strace-${pid}-${Date.now()}.txt`);
  const p = spawn('strace', ['-f', '-qq', '-yy', '-s', '0', '-e', 'abbrev=none', '-e', 'signal=none',
    '-e', 'trace=sendmsg,sendto,recvmsg,recvfrom,write,writev,read', '-o', file, '-p', String(pid)], { stdio: 'ignore' });
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => p.kill('SIGINT'), seconds * 1000);
    p.once('error', (e) => { clearTimeout(timer); reject(e); });
    p.once('exit', () => {
      clearTimeout(timer);
      try {
        resolve(parseStrace(fs.readFileSync(file, 'utf8'), Math.round((performance.now() - t0) / 100) / 10));
      } catch (e) {
        reject(e);
      } finally {
        fs.rmSync(file, { force: true });
      }
    });
  });
}

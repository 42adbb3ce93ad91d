// The lab fixture shared by tests and benches (root only): network namespaces, veth pairs, bridges,
// addresses, cgroups for eBPF labs and the processes started in them, all under one unique name prefix
// and all removed by destroy(), which also runs when the process exits or is interrupted. No jest here:
// benches import it.
//
//   const lab = new NetLab('kbf');                 // names kbf-<pid><random>-<role>
//   const node = lab.netns('node'), pod = lab.netns('pod');
//   lab.bridge(node, 'br0', ['10.244.1.1/24']);
//   lab.veth({ ns: node, name: 'vpod', master: 'br0' }, { ns: pod, name: 'eth0', addrs: ['10.244.1.10/24'] });
//   const cg = lab.cgroup('attach');               // a cgroup v2 directory, emptied and removed at the end
//   ... lab.destroy();
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Runs a command, returns its stdout; throws with its stderr when it fails. */
export function run(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 1 << 30 });
}

/** The netns path of a namespace name (for nsenter and the addon's netns argument). */
export const nsPath = (name: string): string => `/var/run/netns/${name}`;

/** The cgroup v2 mount point, from /proc/self/mountinfo (undefined when there is none). */
export function cgroup2Root(): string | undefined {
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [pre, post] = line.split(' - ');
    if (post?.startsWith('cgroup2 ')) return pre.split(' ')[4];
  }
  return undefined;
}

/** One end of a veth pair: its namespace and name; optionally a bridge to join and addresses (CIDR). */
export interface VethEnd { ns: string; name: string; master?: string; addrs?: string[] }

const live = new Set<NetLab>();
let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => { for (const l of [...live]) l.destroy(); });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));
}

export class NetLab {
  /** The prefix of every name made here: `<prefix>-<pid in base 36><random>`. */
  readonly id: string;
  private readonly namespaces: string[] = [];
  private readonly cgroups: string[] = [];
  private readonly children = new Set<ChildProcess>();
  private destroyed = false;

  /** `prefix`: what every namespace and cgroup name starts with (KPNG_LAB_PREFIX wins when set). */
  constructor(prefix = 'kl') {
    this.id = `${process.env.KPNG_LAB_PREFIX ?? prefix}-${process.pid.toString(36)}${crypto.randomBytes(3).toString('hex')}`;
    hookExit();
    live.add(this);
  }

  /** A unique global name for `role`. */
  name(role: string): string { return `${this.id}-${role}`; }

  /** A new network namespace with loopback up; `noDad`: IPv6 addresses usable at once on every link. */
  netns(role: string, opts: { noDad?: boolean } = {}): string {
    const n = this.name(role);
    run('ip', ['netns', 'add', n]);
    this.namespaces.push(n);
    this.ip(n, 'link', 'set', 'lo', 'up');
    if (opts.noDad) {
      this.sysctl(n, 'net.ipv6.conf.all.accept_dad=0');
      this.sysctl(n, 'net.ipv6.conf.default.accept_dad=0');
    }
    return n;
  }

  /** `ip -n NS ...`. */
  ip(ns: string, ...args: string[]): string { return run('ip', ['-n', ns, ...args]); }

  /** A command inside a namespace, synchronously; returns stdout. */
  exec(ns: string, cmd: string, args: string[], input?: string): string {
    return run('ip', ['netns', 'exec', ns, cmd, ...args], input);
  }

  sysctl(ns: string, kv: string): void { this.exec(ns, 'sysctl', ['-qw', kv]); }

  /** An address (CIDR; IPv6 without DAD) on a device. */
  addr(ns: string, dev: string, cidr: string): void {
    if (cidr.includes(':')) this.ip(ns, '-6', 'addr', 'add', cidr, 'dev', dev, 'nodad');
    else this.ip(ns, 'addr', 'add', cidr, 'dev', dev);
  }

  /** A bridge with addresses, up. */
  bridge(ns: string, name: string, addrs: string[] = []): void {
    this.ip(ns, 'link', 'add', name, 'type', 'bridge');
    for (const a of addrs) this.addr(ns, name, a);
    this.ip(ns, 'link', 'set', name, 'up');
  }

  /** A veth pair between two namespaces, both ends up, each on its bridge and with its addresses. */
  veth(a: VethEnd, b: VethEnd): void {
    this.ip(a.ns, 'link', 'add', a.name, 'type', 'veth', 'peer', 'name', b.name, 'netns', b.ns);
    for (const end of [a, b]) {
      if (end.master) this.ip(end.ns, 'link', 'set', end.name, 'master', end.master);
      for (const cidr of end.addrs ?? []) this.addr(end.ns, end.name, cidr);
      this.ip(end.ns, 'link', 'set', end.name, 'up');
    }
  }

  /** A new cgroup v2 directory named for `role` (an eBPF lab attaches to it); its processes are killed
   *  and it is removed by destroy(). Throws when no cgroup v2 is mounted. */
  cgroup(role: string): string {
    const root = cgroup2Root();
    if (!root) throw new Error('no cgroup v2 mount in /proc/self/mountinfo (mount one, e.g. mount -t cgroup2 none /sys/fs/cgroup/unified)');
    const p = path.join(root, this.name(role));
    fs.mkdirSync(p);
    this.cgroups.push(p);
    return p;
  }

  /** A cgroup made elsewhere (e.g. again at the path of one removed) that destroy() removes too. */
  adoptCgroup(p: string): void {
    if (!this.cgroups.includes(p)) this.cgroups.push(p);
  }

  /** Kills what runs in a cgroup of this lab and removes it (it may take a few tries while they exit). */
  removeCgroup(p: string): void {
    for (let i = 0; i < 50 && fs.existsSync(p); i++) {
      try {
        for (const pid of fs.readFileSync(path.join(p, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
          try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
        }
        fs.rmdirSync(p);
      } catch {
        spawnSync('sleep', ['0.02']);
      }
    }
    const i = this.cgroups.indexOf(p);
    if (i >= 0) this.cgroups.splice(i, 1);
  }

  /** A long-running process inside a namespace (nsenter: /sys stays as it is, unlike `ip netns exec`);
   *  killed by destroy(). */
  spawnIn(ns: string, cmd: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess {
    const child = spawn('nsenter', [`--net=${nsPath(ns)}`, cmd, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: env ?? process.env });
    this.children.add(child);
    child.on('exit', () => this.children.delete(child));
    return child;
  }

  /** Leaves a namespace in place at the end (to look at it after a run); the caller removes it. */
  keep(ns: string): void {
    const i = this.namespaces.indexOf(ns);
    if (i >= 0) this.namespaces.splice(i, 1);
  }

  /** Kills every process started here or running in the namespaces and cgroups, then removes them;
   *  the lab can make new ones afterwards. */
  clear(): void {
    for (const c of this.children) { try { c.kill('SIGKILL'); } catch { /* gone */ } }
    for (const p of [...this.cgroups]) this.removeCgroup(p);
    for (const n of this.namespaces) {
      const pids = spawnSync('ip', ['netns', 'pids', n], { encoding: 'utf8' }).stdout?.split('\n').filter(Boolean) ?? [];
      for (const pid of pids) { try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ } }
    }
    for (const n of this.namespaces.splice(0)) spawnSync('ip', ['netns', 'del', n]);
  }

  /** Removes one namespace of this lab now. */
  removeNetns(ns: string): void {
    this.keep(ns);
    spawnSync('ip', ['netns', 'del', ns]);
  }

  /** clear(), once, for good. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    live.delete(this);
    this.clear();
  }
}

// A small cluster built from network namespaces, for e2e tests and benchmarks (root only).
//
//   client (192.168.50.100, fd00:50::100) ──┐
//   n1     (192.168.50.11,  fd00:50::11)  ──┼── lan bridge (namespace "lan")
//   n2     (192.168.50.12,  fd00:50::12)  ──┘
//   n1: bridge br0 10.244.1.1/24 fd00:244:1::1/64 ── pods p1a .10, p1b .11
//   n2: bridge br0 10.244.2.1/24 fd00:244:2::1/64 ── pods p2a .10, p2b .11
//
// Every address lives only inside namespaces created here, through the shared lab fixture
// (test/shared/netlab.ts): names carry a unique id, so parallel runs never clash; destroy() (also run
// on process exit) kills what was started and deletes every namespace. Pods run echo-server.js
// (answers with its own and the client's address).
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { NetLab } from '../../shared/netlab';

// The helper scripts are plain JS beside this file in the source tree (also when run from dist/).
const HERE = __dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`);
export const NODE_BIN = path.resolve(HERE, '../../../node_modules/.bin/node');
const ECHO = path.join(HERE, 'echo-server.js');
const PROBE = path.join(HERE, 'probe.js');
/** SCTP server and probe (Python: Node has no SCTP sockets). */
export const SCTP = path.join(HERE, 'sctp.py');

export const SERVER_PORTS = [8080, 8081, 9090];

export interface PodSpec { name: string; node: 'n1' | 'n2'; v4: string; v6: string }

export const ADDR = {
  client: { v4: '192.168.50.100', v6: 'fd00:50::100' },
  n1: { v4: '192.168.50.11', v6: 'fd00:50::11', podCidr4: '10.244.1.0/24', podCidr6: 'fd00:244:1::/64', gw4: '10.244.1.1', gw6: 'fd00:244:1::1' },
  n2: { v4: '192.168.50.12', v6: 'fd00:50::12', podCidr4: '10.244.2.0/24', podCidr6: 'fd00:244:2::/64', gw4: '10.244.2.1', gw6: 'fd00:244:2::1' },
  clusterCidr4: '10.244.0.0/16',
  clusterCidr6: 'fd00:244::/32',
  // Routed from the client to n1 (load-balancer and external IPs live here).
  lbRange4: '192.168.60.0/24',
  lbRange6: 'fd00:60::/64',
};

export const PODS: PodSpec[] = [
  { name: 'p1a', node: 'n1', v4: '10.244.1.10', v6: 'fd00:244:1::10' },
  { name: 'p1b', node: 'n1', v4: '10.244.1.11', v6: 'fd00:244:1::11' },
  { name: 'p2a', node: 'n2', v4: '10.244.2.10', v6: 'fd00:244:2::10' },
  { name: 'p2b', node: 'n2', v4: '10.244.2.11', v6: 'fd00:244:2::11' },
];

export interface ProbeResult {
  ok: boolean;
  err?: string;
  name?: string;
  me?: string;
  peer?: string;
  port?: number;
  ms: number;
  connectMs?: number;
}

type Role = 'lan' | 'n1' | 'n2' | 'client' | 'p1a' | 'p1b' | 'p2a' | 'p2b';

export class Lab {
  readonly id: string;
  readonly ns: Record<Role, string>;
  private readonly net: NetLab;
  private readonly children = new Set<ChildProcess>();

  private constructor() {
    // KPNG_LAB_PREFIX: the namespace prefix a lab run is allowed to use (default kl).
    this.net = new NetLab('kl');
    this.id = this.net.id;
    const n = (s: string) => this.net.name(s);
    this.ns = { lan: n('lan'), n1: n('n1'), n2: n('n2'), client: n('client'), p1a: n('p1a'), p1b: n('p1b'), p2a: n('p2a'), p2b: n('p2b') };
  }

  /** Build the whole lab; `servers: false` skips the echo servers (benchmarks that only need n1). */
  static async create(opts: { servers?: boolean; minimal?: boolean } = {}): Promise<Lab> {
    const lab = new Lab();
    try {
      lab.build(opts.minimal ?? false);
      if (opts.servers ?? true) await lab.startServers();
    } catch (e) {
      lab.destroySync();
      throw e;
    }
    return lab;
  }

  /** Run a command inside a namespace, synchronously; returns stdout. */
  exec(ns: string, cmd: string, args: string[], input?: string): string {
    return this.net.exec(ns, cmd, args, input);
  }

  ip(ns: string, ...args: string[]): void {
    this.net.ip(ns, ...args);
  }

  private sysctl(ns: string, kv: string): void {
    this.net.sysctl(ns, kv);
  }

  private build(minimal: boolean): void {
    const { ns } = this;
    const roles = (minimal ? ['lan', 'n1', 'client'] : Object.keys(ns)) as Role[];
    for (const r of roles) this.net.netns(r, { noDad: true });
    // The LAN: one bridge in its own namespace, nodes and client attached.
    this.ip(ns.lan, 'link', 'add', 'lan', 'type', 'bridge');
    this.ip(ns.lan, 'link', 'set', 'lan', 'up');
    const lanHosts: Array<['n1' | 'n2' | 'client', { v4: string; v6: string }]> =
      minimal ? [['n1', ADDR.n1], ['client', ADDR.client]] : [['n1', ADDR.n1], ['n2', ADDR.n2], ['client', ADDR.client]];
    for (const [h, a] of lanHosts) {
      this.ip(ns.lan, 'link', 'add', `to-${h}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns[h]);
      this.ip(ns.lan, 'link', 'set', `to-${h}`, 'master', 'lan', 'up');
      this.ip(ns[h], 'addr', 'add', `${a.v4}/24`, 'dev', 'eth0');
      this.ip(ns[h], '-6', 'addr', 'add', `${a.v6}/64`, 'dev', 'eth0', 'nodad');
      this.ip(ns[h], 'link', 'set', 'eth0', 'up');
    }
    // Nodes: forwarding, a pod bridge, routes to the other node's pods, a default route (towards the
    // client, which does not forward) so that service IPs without endpoints are routable and rejected.
    const nodes: Array<'n1' | 'n2'> = minimal ? ['n1'] : ['n1', 'n2'];
    for (const node of nodes) {
      const a = ADDR[node];
      const n = ns[node];
      this.sysctl(n, 'net.ipv4.ip_forward=1');
      this.sysctl(n, 'net.ipv6.conf.all.forwarding=1');
      this.sysctl(n, 'net.ipv4.conf.all.rp_filter=0');
      this.sysctl(n, 'net.ipv4.conf.default.rp_filter=0');
      this.ip(n, 'link', 'add', 'br0', 'type', 'bridge');
      this.ip(n, 'addr', 'add', `${a.gw4}/24`, 'dev', 'br0');
      this.ip(n, '-6', 'addr', 'add', `${a.gw6}/64`, 'dev', 'br0', 'nodad');
      this.ip(n, 'link', 'set', 'br0', 'up');
      // Bridged pod-to-pod replies must see conntrack (kube-proxy needs br_netfilter too).
      try {
        this.sysctl(n, 'net.bridge.bridge-nf-call-iptables=1');
        this.sysctl(n, 'net.bridge.bridge-nf-call-ip6tables=1');
      } catch { /* not available: same-node pod->service->pod without masquerade may fail */ }
      this.ip(n, 'route', 'add', 'default', 'via', ADDR.client.v4);
      this.ip(n, '-6', 'route', 'add', 'default', 'via', ADDR.client.v6);
    }
    if (!minimal) {
      this.ip(ns.n1, 'route', 'add', ADDR.n2.podCidr4, 'via', ADDR.n2.v4);
      this.ip(ns.n1, '-6', 'route', 'add', ADDR.n2.podCidr6, 'via', ADDR.n2.v6);
      this.ip(ns.n2, 'route', 'add', ADDR.n1.podCidr4, 'via', ADDR.n1.v4);
      this.ip(ns.n2, '-6', 'route', 'add', ADDR.n1.podCidr6, 'via', ADDR.n1.v6);
    }
    // The outside client reaches load-balancer and external IPs through n1.
    this.ip(ns.client, 'route', 'add', ADDR.lbRange4, 'via', ADDR.n1.v4);
    this.ip(ns.client, '-6', 'route', 'add', ADDR.lbRange6, 'via', ADDR.n1.v6);
    if (minimal) return;
    // Pods: a veth into their node's bridge.
    for (const p of PODS) {
      const node = ns[p.node];
      const pod = ns[p.name as keyof Lab['ns']];
      const a = ADDR[p.node];
      this.ip(node, 'link', 'add', `v-${p.name}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod);
      this.ip(node, 'link', 'set', `v-${p.name}`, 'master', 'br0', 'up');
      // Like kubelet's hairpin-veth: a pod DNATed back to itself (bridged by br_netfilter) leaves by its own port.
      this.ip(node, 'link', 'set', `v-${p.name}`, 'type', 'bridge_slave', 'hairpin', 'on');
      this.ip(pod, 'addr', 'add', `${p.v4}/24`, 'dev', 'eth0');
      this.ip(pod, '-6', 'addr', 'add', `${p.v6}/64`, 'dev', 'eth0', 'nodad');
      this.ip(pod, 'link', 'set', 'eth0', 'up');
      this.ip(pod, 'route', 'add', 'default', 'via', a.gw4);
      this.ip(pod, '-6', 'route', 'add', 'default', 'via', a.gw6);
    }
  }

  private async startServers(): Promise<void> {
    await Promise.all(PODS.map((p) => this.startServer(this.ns[p.name as keyof Lab['ns']], p.name)));
  }

  /** Start an echo server in a namespace and wait until it listens. */
  async startServer(ns: string, name: string, ports: number[] = SERVER_PORTS): Promise<ChildProcess> {
    const child = this.spawnIn(ns, NODE_BIN, [ECHO, name, ports.join(',')]);
    await new Promise<void>((resolve, reject) => {
      let out = '';
      // Generous: in the emulated guest on a busy host, a node process takes seconds to start.
      const t = setTimeout(() => reject(new Error(`echo server ${name} did not start: ${out}`)), 30000);
      child.stdout!.on('data', (d) => { out += d; if (out.includes('ready')) { clearTimeout(t); resolve(); } });
      child.on('exit', (c) => { clearTimeout(t); reject(new Error(`echo server ${name} exited ${c}`)); });
    });
    return child;
  }

  /** Spawn a long-running process inside a namespace; it is killed by destroy(). */
  spawnIn(ns: string, cmd: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: env ?? process.env });
    this.children.add(child);
    child.on('exit', () => this.children.delete(child));
    return child;
  }

  /** COUNT sequential TCP connections / UDP exchanges from namespace `from`. */
  async probe(from: string, proto: 'tcp' | 'udp', host: string, port: number, count = 1, timeoutMs = 1500, srcPort = 0): Promise<ProbeResult[]> {
    return this.results(from, NODE_BIN, [PROBE, proto, host, String(port), String(count), String(timeoutMs), String(srcPort)], count);
  }

  /** COUNT sequential SCTP connections from namespace `from` (lab/sctp.py). */
  async probeSctp(from: string, host: string, port: number, count = 1, timeoutMs = 2000): Promise<ProbeResult[]> {
    return this.results(from, 'python3', [SCTP, 'probe', host, String(port), String(count), String(timeoutMs)], count);
  }

  /** A probe's COUNT JSON lines, one per attempt. */
  private async results(from: string, cmd: string, args: string[], count: number): Promise<ProbeResult[]> {
    const child = this.spawnIn(from, cmd, args);
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => { out += d; });
    child.stderr!.on('data', (d) => { err += d; });
    // 'close', not 'exit': a short-lived probe can exit before its stdout is read to the end.
    const code: number | null = await new Promise((resolve) => child.on('close', resolve));
    const lines = out.split('\n').filter((l) => l.trim() !== '');
    if (code !== 0 || lines.length !== count) throw new Error(`probe failed (exit ${code}): ${err}${out}`);
    return lines.map((l) => JSON.parse(l) as ProbeResult);
  }

  /** `nft list ...` inside a namespace (inspection only). */
  nftList(ns: string, ...what: string[]): string {
    try {
      return this.exec(ns, 'nft', ['list', ...(what.length ? what : ['ruleset'])]);
    } catch (e) {
      return `(nft list failed: ${(e as Error).message})`;
    }
  }

  /** Kill every process started here and inside the namespaces, then delete them. */
  destroySync(): void {
    for (const c of this.children) { try { c.kill('SIGKILL'); } catch { /* gone */ } }
    this.net.destroy();
  }

  async destroy(): Promise<void> {
    this.destroySync();
  }
}

/** Write a temp file that is removed on process exit. */
export function tempFile(name: string, content: string): string {
  const dir = fs.mkdtempSync('/tmp/kpng-lab-');
  const f = path.join(dir, name);
  fs.writeFileSync(f, content);
  process.on('exit', () => { try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* ignore */ } });
  return f;
}

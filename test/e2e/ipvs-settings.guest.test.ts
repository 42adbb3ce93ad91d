// kube-proxy's --ipvs-* settings in a kernel that has IPVS (the qemu guest, hack/qemu/test-guest.sh): the
// real `kpng file --to ipvs` in a throwaway network namespace with strict ARP, the three timeouts and
// exclude CIDRs; the kernel read back through /proc/sys and the addon's IPVS dumps. Another program's
// virtual servers are made with the addon before kpng starts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Netns } from '../helpers/netns';
import { ep, node, slice, svc } from '../helpers/k8s';
import { ipvsApply, ipvsConfig, ipvsDump, type IpvsService } from '../../src/native/ipvs';

const ROOT = path.resolve(__dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`), '../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');

/** Another program's virtual servers: one inside the excluded 10.1.0.0/16, one outside. */
const foreignIn: IpvsService = { address: '10.1.0.5', protocol: 'tcp', port: 80, scheduler: 'wlc' };
const foreignOut: IpvsService = { address: '10.2.0.5', protocol: 'tcp', port: 80, scheduler: 'wlc' };

const web = [svc('web', { clusterIPs: ['10.96.0.10'] }), slice('web-1', 'web', [ep('10.244.1.10', { node: 'n1', ready: true })])];
/** A service whose cluster IP is inside an excluded CIDR: kpng programs it (as kube-proxy does). */
const inside = [svc('inside', { clusterIPs: ['10.1.0.10'] }), slice('inside-1', 'inside', [ep('10.244.1.11', { node: 'n1', ready: true })])];

const SETTINGS = ['--ipvs-strict-arp', '--ipvs-tcp-timeout=5m', '--ipvs-tcpfin-timeout', '0s', '--ipvs-udp-timeout=45s',
  '--ipvs-exclude-cidrs=10.1.0.0/16', '--ipvs-exclude-cidrs', 'fd00:1::/64'];

/** kpng in the namespace, its log lines (stdout and stderr) kept for waiting on. */
class Kpng {
  readonly lines: string[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;
  constructor(ns: Netns, args: string[]) {
    this.child = spawn('ip', ['netns', 'exec', ns.name, process.execPath, CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const take = (d: Buffer) => { this.lines.push(...String(d).split('\n').filter(Boolean)); };
    this.child.stdout!.on('data', take);
    this.child.stderr!.on('data', take);
    this.exited = new Promise((r) => this.child.on('exit', (code) => r(code)));
  }
  get log(): string { return this.lines.join('\n'); }
  count(re: RegExp): number { return this.lines.filter((l) => re.test(l)).length; }
  async waitCount(re: RegExp, n: number, timeoutMs = 60000): Promise<void> {
    const t0 = Date.now();
    while (this.count(re) < n) {
      if (this.lines.some((l) => /sync failed/.test(l))) throw new Error(`kpng sync failed; log:\n${this.log}`);
      if (this.child.exitCode !== null) throw new Error(`kpng exited ${this.child.exitCode}; log:\n${this.log}`);
      if (Date.now() - t0 > timeoutMs) throw new Error(`no ${n} lines matching ${re} in ${timeoutMs} ms; log:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  async stop(): Promise<number | null> {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}

const FULL = /ipvs: revision \d+: full .* sync, /;
const SYNC = /ipvs: revision \d+: .* sync, /;

describe('--ipvs-* settings (guest kernel)', () => {
  let ns: Netns;
  let dir: string;
  let file: string;
  let kpng: Kpng | undefined;
  const call = () => ({ netns: ns.path });
  const procSys = (name: string) => ns.exec('cat', [`/proc/sys/${name}`]).trim();
  const write = (objects: unknown[]) => {
    fs.writeFileSync(`${file}.tmp`, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [node('n1'), ...objects] }));
    fs.renameSync(`${file}.tmp`, file);
  };
  const virtuals = async () => new Map((await ipvsDump(call())).map((s) => [`${s.address}:${s.port}`, s]));

  beforeAll(async () => {
    ns = new Netns('kipo');
    dir = fs.mkdtempSync('/tmp/kipo-');
    file = path.join(dir, 'state.json');
    // Known starting values, so each change below is one kpng made.
    ns.exec('sysctl', ['-qw', 'net.ipv4.conf.all.arp_ignore=0', 'net.ipv4.conf.all.arp_announce=0']);
    expect(await ipvsConfig({ tcp: 900, tcpFin: 77, udp: 300 }, call())).toEqual({ tcp: 900, tcpFin: 77, udp: 300 });
    const r = await ipvsApply([
      { op: 'addService', service: foreignIn },
      { op: 'addDest', service: foreignIn, dest: { address: '192.168.7.1', port: 80, weight: 3 } },
      // Weight 0 with no connections: what kpng's drain check deletes in its own virtual servers.
      { op: 'addDest', service: foreignIn, dest: { address: '192.168.7.2', port: 80, weight: 0 } },
      { op: 'addService', service: foreignOut },
      { op: 'addDest', service: foreignOut, dest: { address: '192.168.7.1', port: 80, weight: 1 } },
    ], call());
    expect(r.failed).toEqual([]);
    write([...web, ...inside]);
    // --sync-period: full syncs keep coming, so the test can wait for one after a change.
    kpng = new Kpng(ns, ['file', '--input', file, '--node', 'n1', '--to', 'ipvs', '--min-sync-period', '100ms', '--sync-period', '2s',
      '--ipvs-drain-check', '200ms', ...SETTINGS]);
    await kpng.waitCount(FULL, 1);
  }, 180000);

  afterAll(async () => {
    await kpng?.stop();
    ns?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts && kpng) {
      // eslint-disable-next-line no-console
      console.log(`kpng log:\n${kpng.log}\n\nipvsadm:\n${ns.exec('ipvsadm', ['-Ln'])}`);
    }
  });

  test('strict ARP: arp_ignore=1, arp_announce=2, logged before -> after', () => {
    expect(procSys('net/ipv4/conf/all/arp_ignore')).toBe('1');
    expect(procSys('net/ipv4/conf/all/arp_announce')).toBe('2');
    expect(kpng!.log).toContain('ipvs: sysctl net/ipv4/conf/all/arp_ignore 0 -> 1');
    expect(kpng!.log).toContain('ipvs: sysctl net/ipv4/conf/all/arp_announce 0 -> 2');
    // The sysctls IPVS always needs are still set.
    expect(procSys('net/ipv4/vs/conntrack')).toBe('1');
  });

  test('timeouts: tcp 5m and udp 45s set, tcpfin 0s leaves the kernel\'s value; logged', async () => {
    expect(await ipvsConfig(undefined, call())).toEqual({ tcp: 300, tcpFin: 77, udp: 45 });
    expect(kpng!.log).toContain('ipvs: timeouts tcp 900s -> 300s, tcpfin 77s, udp 300s -> 45s');
    expect(ns.exec('ipvsadm', ['-L', '--timeout'])).toMatch(/300 77 45/);
  });

  test('full syncs: the foreign virtual server inside the excluded CIDR stays as it was, the one outside is deleted', async () => {
    // A later full sync too, with the drain check running every 200 ms meanwhile (were the foreign virtual
    // server tracked, its weight-0 real server without connections would be deleted).
    await kpng!.waitCount(FULL, kpng!.count(FULL) + 1);
    const v = await virtuals();
    expect(v.has('10.2.0.5:80')).toBe(false);
    const kept = v.get('10.1.0.5:80');
    expect(kept).toMatchObject({ protocol: 'tcp', scheduler: 'wlc' });
    expect(kept!.dests.map((d) => `${d.address}:${d.port} ${d.weight}`).sort()).toEqual(['192.168.7.1:80 3', '192.168.7.2:80 0']);
    // kpng's own, including the service inside the excluded CIDR (kube-proxy programs those too).
    expect(v.get('10.96.0.10:80')!.dests.map((d) => `${d.address}:${d.port} ${d.weight}`)).toEqual(['10.244.1.10:8080 1']);
    expect(v.get('10.1.0.10:80')!.dests.map((d) => `${d.address}:${d.port} ${d.weight}`)).toEqual(['10.244.1.11:8080 1']);
    expect(v.get('10.96.0.10:80')!.scheduler).toBe('rr');
  });

  test('a service inside the excluded CIDR removed: its virtual server is left in place, its address unbound', async () => {
    write(web);
    await kpng!.waitCount(/virtual server tcp\/10\.1\.0\.10\/80 no longer used, left in place \(inside --ipvs-exclude-cidrs\)/, 1);
    await kpng!.waitCount(FULL, kpng!.count(FULL) + 1);
    const v = await virtuals();
    expect(v.has('10.1.0.10:80')).toBe(true);
    expect(v.has('10.1.0.5:80')).toBe(true);
    expect(v.has('10.96.0.10:80')).toBe(true);
    expect(ns.exec('ip', ['-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'])).not.toContain('10.1.0.10');
    // And a virtual server no service asks for, outside the CIDRs, made while kpng runs: gone at the next full sync.
    expect((await ipvsApply([{ op: 'addService', service: foreignOut }], call())).failed).toEqual([]);
    // Two full syncs: one may have read the kernel before the add and end after it.
    await kpng!.waitCount(FULL, kpng!.count(FULL) + 2);
    expect((await virtuals()).has('10.2.0.5:80')).toBe(false);
  });

  test('restarts (`--once`): with --ipvs-exclude-cidrs the virtual servers inside survive; without it they are deleted like any unknown one', async () => {
    await kpng!.stop();
    kpng = undefined;
    const once = (extra: string[]) => spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, CLI, 'file', '--input', file, '--node', 'n1', '--to', 'ipvs', '--once', ...extra], { encoding: 'utf8', timeout: 120000 });
    // With the exclusion: both survive the restart's full sync.
    const kept = once(['--ipvs-exclude-cidrs', '10.1.0.0/16']);
    expect(kept.status).toBe(0);
    expect(kept.stderr).toMatch(SYNC);
    let v = await virtuals();
    expect([...v.keys()].sort()).toEqual(['10.1.0.10:80', '10.1.0.5:80', '10.96.0.10:80']);
    // No timeout flags: the kernel's values stay; no strict ARP flag: the sysctls are not touched back.
    expect(await ipvsConfig(undefined, call())).toEqual({ tcp: 300, tcpFin: 77, udp: 45 });
    expect(kept.stderr).not.toMatch(/ipvs: timeouts/);
    expect(procSys('net/ipv4/conf/all/arp_ignore')).toBe('1');
    // Without it: kpng owns every virtual server of its namespace.
    const plain = once([]);
    expect(plain.status).toBe(0);
    v = await virtuals();
    expect([...v.keys()]).toEqual(['10.96.0.10:80']);
  });

  test('--init-only: strict ARP and the timeouts are set, nothing is programmed', async () => {
    const fresh = new Netns('kipo');
    try {
      const c = { netns: fresh.path };
      fresh.exec('sysctl', ['-qw', 'net.ipv4.conf.all.arp_ignore=0', 'net.ipv4.conf.all.arp_announce=0']);
      const before = await ipvsConfig(undefined, c);
      const r = spawnSync('ip', ['netns', 'exec', fresh.name, process.execPath, CLI, 'file', '--input', file, '--node', 'n1', '--to', 'ipvs', '--init-only',
        '--ipvs-strict-arp', '--ipvs-udp-timeout=33s'], { encoding: 'utf8', timeout: 120000 });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.stringContaining('init-only: privileged settings applied') });
      expect(r.stderr).toContain('ipvs: sysctl net/ipv4/conf/all/arp_ignore 0 -> 1');
      expect(fresh.exec('cat', ['/proc/sys/net/ipv4/conf/all/arp_announce']).trim()).toBe('2');
      expect(await ipvsConfig(undefined, c)).toEqual({ ...before, udp: 33 });
      expect(await ipvsDump(c)).toEqual([]);
      expect(fresh.exec('ip', ['-o', 'link'])).not.toContain('kube-ipvs0');
    } finally {
      fresh.destroy();
    }
  });
});

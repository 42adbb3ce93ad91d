// `--to ebpf` restarted over any pin state a node can leave behind, with real connections before and
// after each: the cgroup removed and recreated elsewhere (severed links), `--cgroup` changed to another
// live cgroup (the old one must stop being balanced), pinned maps of another size (--ebpf-map-entries)
// and of another layout (a BPF object built with a wider backend value and an extra map, loaded over
// the pins), and a pin directory another kpng holds. kpng (the CLI, from dist/) runs in a node network
// namespace; the client joins a test cgroup and enters a namespace with no route to the service
// address, so a connection that works was balanced by the socket LB of that cgroup.
import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EbpfLoader, ebpfCleanup } from '../../src/native/ebpf';
import { decodeBackend, encodeBackend } from '../../src/backend/ebpf/maps';
import { ECHO_SERVER, runClient, startServers, useEbpfLab } from '../helpers/ebpf-lab';
import { gated, need } from '../helpers/gate';
import { NetLab } from '../shared/netlab';
import { KpngProcess, NODE } from '../shared/kpng-process';
import { ep, list, node, READY, slice, svc, type Obj } from '../shared/objects';

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
const BPF_SRC = path.join(ROOT, 'native/bpf/sock_lb.bpf.c');
const BPF_OBJ = path.join(ROOT, 'build/Release/sock_lb.bpf.o');

const d = gated(need.root(), need.cgroup2(), need.native(), need.built(CLI), need.built(BPF_OBJ), need.tool('clang', ['--version'], 'clang')).describe;

/** Service `name` on port 80 -> 8080 at `ip`, with its endpoints on n1. */
const web = (name: string, ip: string, endpoints: string[]): Obj[] => [
  svc(name, { clusterIPs: [ip], families: ['IPv4'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] }),
  slice(`${name}-1`, name, endpoints.map((a) => ep(a, { ...READY, node: 'n1' }))),
];
const OBJECTS = [node('n1'), ...web('web', '10.96.0.10', ['10.244.1.10', '10.244.1.11'])];
const STATE = list(OBJECTS);

interface Reply { ok: boolean; name?: string; err?: string }

class Lab {
  private readonly net = new NetLab('kpn-pins');
  readonly ns = { node: this.net.name('node'), pa: this.net.name('pa'), pb: this.net.name('pb'), cl: this.net.name('cl') };
  readonly pinDir = `/sys/fs/bpf/${this.net.name('pins')}`;
  readonly dir = fs.mkdtempSync('/tmp/kpn-pins-');
  readonly stateFile = path.join(this.dir, 'state.json');

  cgroup(name: string): string {
    return this.net.cgroup(name);
  }

  /** Removed with the lab, as the lab's own. */
  adoptCgroup(p: string): void {
    this.net.adoptCgroup(p);
  }

  async setup(): Promise<void> {
    for (const role of ['node', 'pa', 'pb', 'cl']) this.net.netns(role);
    this.net.bridge(this.ns.node, 'br0', ['10.244.1.1/24']);
    const addr = { pa: '10.244.1.10', pb: '10.244.1.11', cl: '10.244.1.20' };
    for (const p of ['pa', 'pb', 'cl'] as const) {
      this.net.veth({ ns: this.ns.node, name: `v${p}`, master: 'br0' }, { ns: this.ns[p], name: 'eth0', addrs: [`${addr[p]}/24`] });
    }
    fs.writeFileSync(this.stateFile, JSON.stringify(STATE));
    await startServers(this.net, (['pa', 'pb'] as const).map((p) => [this.ns[p], [ECHO_SERVER, p, '8080']]));
  }

  /** TCP connections to the service from a process in `cgroup` (the client namespace has no route to it). */
  connect(cgroup: string, count = 20): Promise<Reply[]> {
    return runClient<Reply>(this.ns.cl, ['tcp', '10.96.0.10', 80, count], cgroup);
  }

  async removeCgroup(p: string): Promise<void> {
    // Clients still running (a failed test) keep the cgroup busy: they are ours, ended with it.
    this.net.removeCgroup(p);
  }

  async destroy(): Promise<void> {
    try { await ebpfCleanup(this.pinDir); } catch { /* nothing pinned */ }
    this.net.destroy();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** kpng --to ebpf in the lab's node namespace, attached to `cgroup`, pinned in the lab's directory. */
function startKpng(lab: Lab, cgroup: string, extra: string[] = [], table = 'kpn-pins'): KpngProcess {
  return new KpngProcess(['file', '--input', lab.stateFile, '--node', 'n1', '--to', 'ebpf', '--cgroup', cgroup, '--bpffs', lab.pinDir,
    '--ebpf-nft-table', table, '--cluster-cidr', '10.244.0.0/16', '--min-sync-period', '100ms', ...extra], { netns: lab.ns.node, node: NODE, testServers: false });
}

/** The first sync done, whatever it found. */
const firstSync = (k: KpngProcess) => k.waitForLine(/ebpf: revision \d+: full .* sync, /, { timeoutMs: 20000 });

const names = (rs: Reply[]) => new Set(rs.map((r) => (r.ok ? r.name : r.err)));
const BOTH = new Set(['pa', 'pb']);

/** sock_lb.bpf.c built with a wider backend value (another kpng_be layout) and one more map. */
function otherLayoutObject(dir: string): string {
  const src = fs.readFileSync(BPF_SRC, 'utf8');
  const wider = src.replace(/struct backend \{([^}]*)__u8 pad;\n\};/, 'struct backend {$1__u8 pad;\n    __u32 weight;\n};');
  if (wider === src) throw new Error('sock_lb.bpf.c: struct backend not found (update this test)');
  const extra = `${wider}\nstruct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } kpng_old_stats SEC(".maps");\n`;
  const c = path.join(dir, 'sock_lb_old.bpf.c'), o = path.join(dir, 'sock_lb_old.bpf.o');
  fs.writeFileSync(c, extra);
  const multiarch = execFileSync('gcc', ['-print-multiarch']).toString().trim();
  execFileSync('clang', ['-O2', '-g', '-target', 'bpf', `-I/usr/include/${multiarch}`, `-I${path.dirname(BPF_SRC)}`, '-c', c, '-o', o]);
  return o;
}

d('eBPF backend: a restart over any pin state', () => {
  let lab: Lab;
  let kpng: KpngProcess | undefined;
  let cgA = '';

  useEbpfLab({
    async setUp() {
      lab = new Lab();
      await lab.setup();
      cgA = lab.cgroup('a');
      kpng = startKpng(lab, cgA);
      await firstSync(kpng);
    },
    lab: () => lab, kpng: () => kpng, removed: () => [lab.pinDir],
  });

  test('a BPF map entry overwritten by another process (bpftool): found by the audit, logged and rewritten; connections balanced again', async () => {
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    const pin = path.join(lab.pinDir, 'kpng_be');
    const dump = JSON.parse(execFileSync('bpftool', ['map', 'dump', 'pinned', pin, '-j']).toString()) as Array<{ key: string[]; value: string[] }>;
    expect(dump).toHaveLength(2);
    const mark = kpng!.lines.length;
    // Every backend now names an address where nothing listens: connect() sends clients nowhere.
    for (const e of dump) {
      const was = decodeBackend(Buffer.from(e.value.map((b) => parseInt(b, 16))));
      const value = [...encodeBackend({ ...was, addr: '10.244.1.99' })].map(String);
      execFileSync('bpftool', ['map', 'update', 'pinned', pin, 'key', ...e.key.map((b) => String(parseInt(b, 16))), 'value', ...value]);
    }
    await kpng!.waitForLine(/ebpf: 2 entries of the socket LB's maps differ from what kpng wrote \(changed by another process\); rewriting them/, { timeoutMs: 20000, from: mark });
    await kpng!.waitForLine(/changed by another process\): full resync/, { timeoutMs: 20000, from: mark });
    await kpng!.waitForLine(/ebpf: revision \d+: full .* sync, /, { timeoutMs: 20000, from: mark });
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    const after = JSON.parse(execFileSync('bpftool', ['map', 'dump', 'pinned', pin, '-j']).toString()) as Array<{ value: string[] }>;
    expect(after.map((e) => decodeBackend(Buffer.from(e.value.map((b) => parseInt(b, 16)))).addr).sort()).toEqual(['10.244.1.10', '10.244.1.11']);
  }, 60000);

  test('the cgroup removed and recreated elsewhere (severed links): the new cgroup is balanced after one sync', async () => {
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    await kpng!.stop();
    await lab.removeCgroup(cgA);
    const cgB = lab.cgroup('b');
    kpng = startKpng(lab, cgB);
    await firstSync(kpng);
    expect(kpng.log).toMatch(/ebpf: pin directory: link_kpng_connect4, .* each is severed \(the cgroup it was attached to was removed\): replaced by a new link on /);
    expect(kpng.log).not.toMatch(/sync failed/);
    expect(kpng.lines.filter((l) => /is severed/.test(l))).toHaveLength(1);
    expect(names(await lab.connect(cgB))).toEqual(BOTH);
    cgA = cgB;
  }, 60000);

  test('--cgroup changed to another live cgroup: the new one is balanced, the old one no longer', async () => {
    const old = cgA;
    expect(names(await lab.connect(old))).toEqual(BOTH);
    await kpng!.stop();
    const cgC = lab.cgroup('c');
    kpng = startKpng(lab, cgC);
    await firstSync(kpng);
    expect(kpng.log).toMatch(/each is attached to another cgroup \(id \d+; this one's is \d+\): replaced by a new link on /);
    expect(names(await lab.connect(cgC))).toEqual(BOTH);
    // The old links were detached: the old cgroup's connect() is no longer rewritten (no route).
    expect(names(await lab.connect(old, 1))).toEqual(new Set(['ENETUNREACH']));
    cgA = cgC;
  }, 60000);

  test('pinned maps of another size (--ebpf-map-entries changed): replaced, and filled by the first sync', async () => {
    await kpng!.stop();
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '4096']);
    await firstSync(kpng);
    expect(kpng.log).toMatch(/map kpng_svc has max entries 262144 \(this object: 4096\): replaced by an empty map/);
    expect(kpng.log).toMatch(/reused \d+ pinned maps and 8 pinned links/);
    expect(kpng.log).toMatch(/ebpf: 8 pinned links moved to the new programs now that their new maps are filled/);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);

    // Between the open and the first full sync the new maps are empty: the links stay on the previous
    // programs and maps, which still balance (a loader opened here, never synced, then closed: as a
    // kpng stopped before its first sync would leave them).
    await kpng.stop();
    const lb = await EbpfLoader.open({ cgroup: cgA, pinDir: lab.pinDir, mapEntries: 8192 });
    expect(lb.info.found.join('\n')).toMatch(/map kpng_svc has max entries 4096 \(this object: 8192\): replaced/);
    expect(lb.info.pendingLinks).toBe(8);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    await lb.close();
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '8192']);
    await firstSync(kpng);
    expect(kpng.log).toMatch(/reused 5 pinned maps and 8 pinned links/);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
  }, 60000);

  test('--ebpf-prealloc on and off: the service and backend maps are replaced by ones made the other way, filled by the first sync', async () => {
    await kpng!.stop();
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '8192', '--ebpf-prealloc']);
    await firstSync(kpng);
    // BPF_F_NO_PREALLOC is flag 1: the pinned maps had it, preallocated ones do not.
    expect(kpng.log).toMatch(/map kpng_svc has flags 1 \(this object: 0\): replaced by an empty map/);
    expect(kpng.log).toMatch(/map kpng_be has flags 1 \(this object: 0\): replaced by an empty map/);
    expect(kpng.log).toMatch(/ebpf: 8 pinned links moved to the new programs now that their new maps are filled/);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    await kpng.stop();
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '8192']);
    await firstSync(kpng);
    expect(kpng.log).toMatch(/map kpng_svc has flags 0 \(this object: 1\): replaced by an empty map/);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
  }, 60000);

  test('pins of a BPF object with another map layout and an extra map: replaced; the links move to the new programs once their maps are filled', async () => {
    await kpng!.stop();
    // Another build took the pins over (as an older kpng would have left them): its kpng_be is wider
    // and empty, so the service's connections are refused.
    const old = await EbpfLoader.open({ cgroup: cgA, pinDir: lab.pinDir, object: otherLayoutObject(lab.dir), mapEntries: 8192 });
    expect(old.info.found.join('\n')).toMatch(/map kpng_be has value size 20 \(this object: 24\)/);
    expect(old.activate()).toBe(8);   // as its first full sync would have, with nothing to fill
    await old.close();
    expect(names(await lab.connect(cgA, 1))).toEqual(new Set(['ECONNREFUSED']));
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '8192']);
    await firstSync(kpng);
    expect(kpng.log).toMatch(/map kpng_be has value size 24 \(this object: 20\): replaced by an empty map/);
    expect(kpng.log).toMatch(/kpng_old_stats \(bpf-map\) is not in this object: detached and removed/);
    expect(kpng.log).toMatch(/[1-8] pinned links ran programs of another build: updated in place/);
    expect(kpng.log).toMatch(/ebpf: 8 pinned links moved to the new programs now that their new maps are filled/);
    expect(fs.existsSync(path.join(lab.pinDir, 'kpng_old_stats'))).toBe(false);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
  }, 90000);

  test('a pin directory another kpng holds: the second says the socket LB is off (naming the holder) and takes over when the first exits', async () => {
    const second = startKpng(lab, cgA, ['--ebpf-map-entries', '8192'], 'kpn-pins-2');
    try {
      await second.waitForLine(/ebpf: the socket LB is off \(no programs attached\): lock .*: held by another kpng \(pid \d+\)/, { timeoutMs: 20000 });
      // The clean-up will not pull the links from under a running kpng either.
      await expect(ebpfCleanup(lab.pinDir)).rejects.toThrow(/a running kpng holds it \(pid \d+\); stop it first/);
      expect(names(await lab.connect(cgA))).toEqual(BOTH);
      await kpng!.stop();
      kpng = second;
      await second.waitForLine(/ebpf: the socket LB is programmed again/, { timeoutMs: 30000 });
      expect(second.log).not.toMatch(/pin directory:/);
      expect(second.log).toMatch(/reused 5 pinned maps and 8 pinned links/);
      expect(second.lines.filter((l) => /the socket LB is off/.test(l))).toHaveLength(1);
      expect(names(await lab.connect(cgA))).toEqual(BOTH);
    } finally {
      if (kpng !== second) await second.stop();
    }
  }, 90000);

  test('the cgroup removed while kpng runs: the socket LB is said off, /healthz turns 503 and the failure metrics count; the cgroup back: programmed again and healthy', async () => {
    await kpng!.stop();
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '8192', '--sync-period', '2s', '--healthz-bind-address', '127.0.0.1:0', '--metrics-bind-address', '127.0.0.1:0']);
    await firstSync(kpng);
    const port = (what: string) => Number(new RegExp(`${what}: serving on http://127\\.0\\.0\\.1:(\\d+)`).exec(kpng!.log)![1]);
    const get = (p: number, url: string) => new Promise<{ code: number; body: string }>((resolve, reject) => {
      execFile('nsenter', [`--net=/var/run/netns/${lab.ns.node}`, 'curl', '-s', '-w', '\n%{http_code}', `http://127.0.0.1:${p}${url}`], (err, out) => {
        if (err) return reject(err);
        const i = out.lastIndexOf('\n');
        resolve({ code: Number(out.slice(i + 1)), body: out.slice(0, i) });
      });
    });
    const metric = (text: string, sample: string) => Number(text.split('\n').find((l) => l.startsWith(`${sample} `))?.split(' ')[1] ?? 0);
    const healthz = async (want: number) => {
      const t0 = Date.now();
      for (;;) {
        const r = await get(port('healthz'), '/healthz');
        if (r.code === want) return r;
        if (Date.now() - t0 > 40000) throw new Error(`/healthz stayed ${r.code}: ${r.body}; log:\n${kpng!.log}`);
        await new Promise((res) => setTimeout(res, 200));
      }
    };
    await healthz(200);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
    const failures = 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}';
    const failedSyncs = 'kpng_syncs_total{backend="ebpf",result="failed",kind="any"}';
    expect(metric((await get(port('metrics'), '/metrics')).body, failedSyncs)).toBe(0);

    await lab.removeCgroup(cgA);
    await kpng.waitForLine(/ebpf: the socket LB's links were severed \(the cgroup they were attached to was removed; kpng_connect4, .* run nowhere\)/, { timeoutMs: 20000 });
    await kpng.waitForLine(/ebpf: the socket LB is off \(no programs attached\): open cgroup .*: No such file or directory/, { timeoutMs: 20000 });
    const sick = await healthz(503);
    expect(JSON.parse(sick.body)).toMatchObject({ healthy: false, status: { IPv4: { healthy: false } } });
    const m = (await get(port('metrics'), '/metrics')).body;
    expect(metric(m, failures)).toBeGreaterThan(0);
    expect(metric(m, failedSyncs)).toBeGreaterThan(0);
    expect(kpng.lines.filter((l) => /the socket LB is off/.test(l))).toHaveLength(1);

    // A cgroup manager recreates it at the same path: the next retry attaches there.
    fs.mkdirSync(cgA);
    lab.adoptCgroup(cgA);
    await kpng.waitForLine(/ebpf: the socket LB is programmed again/, { timeoutMs: 40000 });
    expect(kpng.log).toMatch(/ebpf: pin directory: link_kpng_connect4, .* each is severed/);
    await healthz(200);
    expect(names(await lab.connect(cgA))).toEqual(BOTH);
  }, 120000);

  test('a restart over maps more than half full takes their ids over: it needs no room for a second copy, and connections go on', async () => {
    await kpng!.stop();
    // 60 more services x 10 endpoints: 663 of the service map's 1024 entries, 602 backends.
    const more = (net: number) => Array.from({ length: 60 }, (_, i) =>
      web(`s${i}`, `10.97.0.${i + 1}`, Array.from({ length: 10 }, (_, e) => `10.${net}.${i}.${e + 1}`))).flat();
    try {
      for (const run of ['fills the maps', 'restarts over them', 'restarts after every pod of the 60 was replaced']) {
        fs.writeFileSync(lab.stateFile, JSON.stringify(list([...OBJECTS, ...more(run.startsWith('restarts after') ? 251 : 250)])));
        kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '1024']);
        await firstSync(kpng);
        // Without the ids taken over, the restart's batch would add 602 backends beside the 602 still
        // pinned, past the map's 1024 entries (E2BIG), and every sync would fail. After the pods were
        // replaced, 600 of them are new beside the 602 pinned: the replaced ones go first.
        expect({ run, failed: kpng.lines.filter((l) => /sync failed|service map is full/.test(l)) }).toEqual({ run, failed: [] });
        const roomFirst = kpng.lines.filter((l) => /do not fit beside the ones they replace/.test(l));
        expect({ run, roomFirst: roomFirst.length }).toEqual({ run, roomFirst: run.startsWith('restarts after') ? 1 : 0 });
        expect(names(await lab.connect(cgA))).toEqual(BOTH);
        await kpng.stop();
      }
    } finally {
      fs.writeFileSync(lab.stateFile, JSON.stringify(STATE));
    }
    kpng = startKpng(lab, cgA, ['--ebpf-map-entries', '1024']);
    await firstSync(kpng);
  }, 90000);
});

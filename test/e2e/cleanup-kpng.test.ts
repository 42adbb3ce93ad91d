// cleanupNode({ which: 'kpng' }) on a namespace that kpng really programmed: the built CLI runs once
// with the nft backend (table kpng) and once with the eBPF backend (table kpng-ebpf, programs attached
// to a test cgroup through links pinned in a test bpffs directory). The clean-up must leave no kpng
// table, no pin and no program on the cgroup, keep a table that is not kpng's, and find nothing the
// second time. Names: namespace, cgroup and pin directory start with kcln-.
import { spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { cgroup2Mount } from '../../src/backend/ebpf';
import { cleanupNode, IPVS_NOT_AVAILABLE, KPNG_NFT_TABLES, type CleanupReport } from '../../src/cleanup';
import { ipvsInfo } from '../../src/native/ipvs';
import { createLogger } from '../../src/util/log';
import { Netns, sh } from '../helpers/netns';
import { gated, need } from '../helpers/gate';
import { ep, familiesOf, list, node, slice, svc } from '../shared/objects';

const ROOT = path.resolve(__dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
const BPF_OBJ = path.join(ROOT, 'build/Release/sock_lb.bpf.o');
const CG_ROOT = process.getuid?.() === 0 ? cgroup2Mount(fs.readFileSync('/proc/self/mountinfo', 'utf8')) : undefined;
const d = gated(need.root(), need.cgroup2(), need.native(), need.built(CLI), need.built(BPF_OBJ), need.tool('bpftool', ['version'], 'bpftool')).describe;

/** Two services with endpoints on this node, dual-stack, one with a node port. */
function state(): unknown {
  const items = [node('n1')];
  for (const [i, name] of ['web', 'dns'].entries()) {
    const ips = [`10.96.0.${10 + i}`, `fd00:96::${10 + i}`];
    const protocol = i === 0 ? 'TCP' : 'UDP';
    items.push(svc(name, {
      type: i === 0 ? 'NodePort' : 'ClusterIP', clusterIPs: ips, ...familiesOf(ips),
      ports: [{ name: 'p', protocol, port: 80, targetPort: 8080, ...(i === 0 ? { nodePort: 30080 } : {}) }],
    }));
    for (const fam of ['IPv4', 'IPv6']) {
      items.push(slice(`${name}-${fam}`, name, [ep(fam === 'IPv4' ? '10.244.1.10' : 'fd00:244:1::10', { ready: true, node: 'n1' })], { family: fam, ports: [{ name: 'p', protocol, port: 8080 }] }));
    }
  }
  return list(items);
}

/** Program ids attached to the cgroup (bpftool: a test tool reading the kernel's view). */
function cgroupPrograms(cgroup: string): number[] {
  const out = sh('bpftool', ['-j', 'cgroup', 'show', cgroup]).trim();
  return out ? (JSON.parse(out) as { id: number }[]).map((p) => p.id) : [];
}

function runKpngIn(netns: string, args: string[]): void {
  // nsenter (not `ip netns exec`): only the network namespace, so /sys/fs/cgroup and bpffs stay visible.
  const r = spawnSync('nsenter', [`--net=${netns}`, NODE, CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`kpng ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
}

d('kpng --cleanup: kpng\'s nft and eBPF objects', () => {
  const id = crypto.randomBytes(3).toString('hex');
  const cgroup = path.join(CG_ROOT ?? '/nonexistent', `kcln-${id}`);
  const pinDir = `/sys/fs/bpf/kcln-${id}`;
  const tables = [...KPNG_NFT_TABLES, 'kpng-ebpf'];
  const log = createLogger('error', () => {});
  let ns: Netns;
  let dir: string;

  beforeAll(() => {
    ns = new Netns('kcln');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kcln-'));
    fs.mkdirSync(cgroup);
    const file = path.join(dir, 'state.json');
    fs.writeFileSync(file, JSON.stringify(state()));
    const common = ['file', '--input', file, '--node', 'n1', '--once', '--cluster-cidr', '10.244.0.0/16,fd00:244::/32'];
    runKpngIn(ns.path, [...common, '--to', 'nft']);
    runKpngIn(ns.path, [...common, '--to', 'ebpf', '--cgroup', cgroup, '--bpffs', pinDir, '--ebpf-nft-table', 'kpng-ebpf']);
    // Someone else's table: the clean-up must not touch it.
    ns.exec('nft', ['-f', '-'], 'table ip kcln-keep {\n chain c {\n  type filter hook input priority 0;\n  ip saddr 192.0.2.1 accept\n }\n}\n');
  }, 120_000);

  afterAll(async () => {
    // Whatever a failed test left: ours, by name.
    if (fs.existsSync(pinDir)) await cleanupNode({ log, which: 'kpng', pinDir, kpngTables: tables, netns: ns.path });
    if (fs.existsSync(cgroup)) fs.rmdirSync(cgroup);
    ns?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  test('removes the tables, unpins and detaches the programs, keeps other tables; a second run finds nothing', async () => {
    const before = ns.ruleset();
    for (const t of ['table ip kpng ', 'table ip6 kpng ', 'table ip kpng-ebpf ', 'table ip6 kpng-ebpf ']) expect(before).toContain(t);
    expect(fs.readdirSync(pinDir).length).toBeGreaterThan(0);
    expect(cgroupPrograms(cgroup).length).toBeGreaterThan(0);

    const report: CleanupReport = await cleanupNode({ log, which: 'kpng', pinDir, kpngTables: tables, netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(new Set(report.tables)).toEqual(new Set(['ip kpng', 'ip6 kpng', 'ip kpng-ebpf', 'ip6 kpng-ebpf']));
    expect(report.pins.some((p) => p.startsWith('link_'))).toBe(true);
    expect(report.chains).toEqual([]);
    const ipvsPresent = await ipvsInfo({ netns: ns.path }).then(() => true, () => false);
    expect(report.notes.includes(IPVS_NOT_AVAILABLE)).toBe(!ipvsPresent);

    const after = ns.ruleset();
    expect(after).not.toMatch(/table ip6? kpng/);
    expect(after).toContain('table ip kcln-keep');
    expect(after).toContain('ip saddr 192.0.2.1 accept');
    expect(fs.existsSync(pinDir)).toBe(false);
    expect(cgroupPrograms(cgroup)).toEqual([]);

    const again = await cleanupNode({ log, which: 'kpng', pinDir, kpngTables: tables, netns: ns.path });
    expect(again.errors).toEqual([]);
    expect([...again.tables, ...again.pins, ...again.chains, ...again.ipvsServices, ...again.links]).toEqual([]);
  }, 60_000);
});

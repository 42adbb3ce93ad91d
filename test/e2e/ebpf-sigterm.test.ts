// SIGTERM during the eBPF backend's first full sync of a large state: kpng abandons the sync at its
// next event-loop turn (the socket LB's maps and the nft part are left as they were) and exits with
// code 0, instead of finishing seconds of planning and map writes first. Real kernel: programs
// attached to a test cgroup, pins in a test bpffs directory, kpng in its own network namespace.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { cgroup2Mount } from '../../src/backend/ebpf';
import { ebpfCleanup } from '../../src/native/ebpf';
import { NetLab } from '../shared/netlab';
import { KpngProcess, NODE } from '../shared/kpng-process';
import { ep, internalIPs, list, node, READY, slice, svc } from '../shared/objects';

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
const SERVICES = 20_000;

/** A kubectl-style List: SERVICES ClusterIP Services with two endpoints each. */
function largeState(): unknown {
  const items = [node('n1', undefined, internalIPs('192.168.60.1'))];
  for (let i = 0; i < SERVICES; i++) {
    const name = `big-${i}`;
    items.push(svc(name, { clusterIPs: [`10.96.${i >> 8}.${i & 255}`], families: ['IPv4'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] }));
    items.push(slice(`${name}-1`, name, [0, 1].map((k) => ep(`10.${245 + k}.${i >> 8}.${i & 255}`, { ...READY, node: 'n1' }))));
  }
  return list(items);
}

describe('SIGTERM during the eBPF backend\'s first full sync', () => {
  const lab = new NetLab('kbs');
  const pinDir = `/sys/fs/bpf/${lab.name('pins')}`;
  let netns = '';
  let cgroup = '';
  let dir = '';

  beforeAll(() => {
    // A gate that throws: a machine without these would otherwise pass by testing nothing.
    if (process.getuid?.() !== 0) throw new Error('needs root (BPF programs, cgroups, network namespaces)');
    const cg = cgroup2Mount(fs.readFileSync('/proc/self/mountinfo', 'utf8'));
    if (!cg) throw new Error('needs a cgroup v2 mount (the socket LB attaches to a cgroup)');
    if (!fs.existsSync(CLI)) throw new Error(`needs the build (${CLI}): make build`);
    cgroup = lab.cgroup('cg');
    netns = lab.netns('ns');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-test-kbs-'));
    fs.writeFileSync(path.join(dir, 'state.json'), JSON.stringify(largeState()));
  });

  afterAll(async () => {
    try { await ebpfCleanup(pinDir); } catch { /* nothing pinned */ }
    lab.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('abandons the sync at its next turn and exits with code 0, the pins left in place', async () => {
    const kpng = new KpngProcess(['file', '--input', path.join(dir, 'state.json'), '--node', 'n1', '--to', 'ebpf',
      '--cgroup', cgroup, '--bpffs', pinDir, '--ebpf-nft-table', 'kpng-kbs', '--cluster-cidr', '10.244.0.0/16', '-v', '4'], { netns, node: NODE, testServers: false });
    // The programs are attached when the first full sync asks for them: it plans 20k services next.
    await kpng.waitForLine(/ebpf: \d+ programs attached/, { timeoutMs: 300_000 });
    const signalled = performance.now();
    await kpng.stop();
    const r = await kpng.exit;
    const log = kpng.log;
    expect(signalled).toBeGreaterThan(0);
    console.log(`SIGTERM to exit during the eBPF first full sync of ${SERVICES} services: ${(performance.now() - signalled).toFixed(0)} ms`);
    expect(r).toEqual({ code: 0, signal: null });
    expect(log).toMatch(/full \(\d+ services, reset\) sync abandoned \(stopping\); the previous rules stay/);
    expect(log).not.toMatch(/ebpf: revision \d+: full .* sync, \d+ messages/);
    // kpng never removes its programs on a stop: the next kpng takes the pinned links over.
    expect(fs.readdirSync(pinDir).some((f) => f.startsWith('link_'))).toBe(true);
  }, 300_000);
});

// bench/scale/kernel-state.ts, the large-cluster bench's outside check of each node's kernel, against
// the real kernel: a real kube-apiserver holds a handful of services (multi-port TCP/UDP, one without
// endpoints, ClientIP affinity, one endpoint, dual-stack, a not-ready endpoint, an external IP), then
// kpng --to nft, kpng --to ebpf and upstream kube-proxy (nftables mode) each program their own network
// namespace from it (bench/vs-upstream's Lab: a forwarder to the API server), and readClusterIps must
// read exactly the table the API says. Then the check must be able to fail: a pick slot deleted from
// kpng's kernel table, a kube-proxy-shaped table with a numgen value missing, and diffTables' lines.
// Every namespace, cgroup and pin directory is named ksk-*.
process.env.KPNG_BENCH_NETNS_PREFIX = 'ksk'; // bench/vs-upstream's Lab names its namespaces with it

import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { buildKubeProxy, upstream } from '../../bench/vs-upstream/proxies';
import { Lab } from '../../bench/vs-upstream/lab';
import { dumpSocketLb } from '../../bench/scale/kernel-ebpf';
import { diffTables, HOLE, readClusterIps, type ClusterIpTable, type KernelPlace, type ProxyKind } from '../../bench/scale/kernel-state';
import { ebpfCleanup } from '../../src/native/ebpf';
import { gated, need } from '../helpers/gate';
import { NetLab } from '../shared/netlab';
import { startControlPlane, type ControlPlane } from './support/controlplane';

const ROOT = path.resolve(__dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
const FORWARDER = path.join(ROOT, 'dist/bench/vs-upstream/forwarder.js');
const BPF_OBJ = path.join(ROOT, 'build/Release/sock_lb.bpf.o');
const POD_CIDRS = '10.244.0.0/16,fd00:244::/32';

const d = gated(need.netns(), need.built(CLI), need.built(FORWARDER)).describe;
const dEbpf = gated(need.cgroup2(), need.native(), need.built(BPF_OBJ)).describe;

interface Ep { ip: string; node: string; ready?: boolean }
interface Svc {
  name: string; ips: string[]; ports: Array<{ name: string; protocol: 'TCP' | 'UDP'; port: number; targetPort: number }>;
  eps: Ep[]; affinity?: number; externalIPs?: string[];
}

const SVCS: Svc[] = [
  {
    name: 'web', ips: ['10.96.0.10'],
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }, { name: 'dns', protocol: 'UDP', port: 53, targetPort: 5353 }],
    eps: [{ ip: '10.244.1.10', node: 'n1' }, { ip: '10.244.1.11', node: 'n1' }, { ip: '10.244.2.10', node: 'n2' }, { ip: '10.244.2.11', node: 'n2', ready: false }],
  },
  { name: 'empty', ips: ['10.96.0.20'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }], eps: [] },
  { name: 'aff', ips: ['10.96.0.30'], affinity: 60, ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }], eps: [{ ip: '10.244.1.20', node: 'n1' }, { ip: '10.244.2.20', node: 'n2' }] },
  {
    name: 'dual', ips: ['10.96.0.40', 'fd00:10:96::40'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
    eps: [{ ip: '10.244.1.40', node: 'n1' }, { ip: '10.244.2.40', node: 'n2' }, { ip: 'fd00:244:1::40', node: 'n1' }, { ip: 'fd00:244:2::40', node: 'n2' }],
  },
  { name: 'single', ips: ['10.96.0.50'], ports: [{ name: 'https', protocol: 'TCP', port: 8443, targetPort: 443 }], eps: [{ ip: '10.244.1.30', node: 'n1' }] },
  // Its external IP is in the proxies' service maps too, and must not read as a cluster IP.
  { name: 'ext', ips: ['10.96.0.60'], externalIPs: ['192.168.60.20'], ports: [{ name: 'http', protocol: 'UDP', port: 80, targetPort: 8080 }], eps: [{ ip: '10.244.2.60', node: 'n2' }] },
];

const fam = (ip: string) => (ip.includes(':') ? 'IPv6' : 'IPv4');
const b = (ip: string) => (ip.includes(':') ? `[${ip}]` : ip);

/** The table the API objects above ask for, written from SVCS alone. */
function expectedTable(): ClusterIpTable {
  const t: ClusterIpTable = new Map();
  for (const s of SVCS) {
    for (const ip of s.ips) {
      for (const p of s.ports) {
        const eps = s.eps.filter((e) => e.ready !== false && fam(e.ip) === fam(ip)).map((e) => `${b(e.ip)}:${p.targetPort}`).sort();
        t.set(`${b(ip)}:${p.port}/${p.protocol}`, eps);
      }
    }
  }
  return t;
}

async function createObjects(cp: ControlPlane): Promise<void> {
  const ok = (what: string, r: { status: number; text: string }) => { if (r.status >= 300) throw new Error(`${what}: ${r.status} ${r.text}`); };
  ok('node', await cp.request('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } }));
  // An address, or kube-proxy waits 30 s for one before it starts.
  ok('node status', await cp.request('PATCH', '/api/v1/nodes/n1/status', { status: { addresses: [{ type: 'InternalIP', address: '192.168.50.1' }] } }));
  for (const s of SVCS) {
    const families = [...new Set(s.ips.map(fam))];
    ok(s.name, await cp.request('POST', '/api/v1/namespaces/default/services', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: s.name },
      spec: {
        type: 'ClusterIP', clusterIP: s.ips[0], clusterIPs: s.ips, ipFamilies: families, ipFamilyPolicy: families.length > 1 ? 'RequireDualStack' : 'SingleStack',
        ports: s.ports.map((p) => ({ name: p.name, protocol: p.protocol, port: p.port, targetPort: p.targetPort })),
        ...(s.affinity ? { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: s.affinity } } } : {}),
        ...(s.externalIPs ? { externalIPs: s.externalIPs } : {}),
      },
    }));
    for (const f of families) {
      const eps = s.eps.filter((e) => fam(e.ip) === f);
      if (eps.length === 0) continue; // `empty`: no slice at all
      ok(`${s.name} slice`, await cp.request('POST', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', {
        apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: f,
        metadata: { name: `${s.name}-${f.toLowerCase()}`, labels: { 'kubernetes.io/service-name': s.name } },
        ports: s.ports.map((p) => ({ name: p.name, protocol: p.protocol, port: p.targetPort })),
        endpoints: eps.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready !== false }, nodeName: e.node })),
      }));
    }
  }
}

/** A command in a lab's namespace (nft: to list, break or hand-build tables). */
const inNs = (lab: Lab, argv: string[], input?: string): string =>
  execFileSync('ip', ['netns', 'exec', lab.netns, ...argv], { encoding: 'utf8', input, maxBuffer: 64 << 20 });

const show = (t: ClusterIpTable) => JSON.stringify(Object.fromEntries([...t].sort()), null, 1);

/** Reads the kernel until it holds `want` (a long-running proxy may not have synced yet), then the last read. */
async function readUntil(kind: ProxyKind, place: KernelPlace, want: ClusterIpTable, lab: Lab, timeoutMs = 60_000): Promise<ClusterIpTable> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let got: ClusterIpTable | undefined;
    try { got = await readClusterIps(kind, place); } catch (e) { if (Date.now() > deadline) throw e; }
    if (got && diffTables(want, got).length === 0) return got;
    if (Date.now() > deadline || (!lab.proxyRunning && lab.proxy?.exitCode !== 0)) {
      throw new Error(`${kind}: the kernel never held the expected table; diff:\n${got ? diffTables(want, got).join('\n') : '(no read)'}\nproxy output:\n${lab.stderrTail.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits for a `--once` proxy to exit 0. */
async function exited(lab: Lab): Promise<void> {
  const p = lab.proxy!;
  const code = p.exitCode ?? await new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`kpng exited ${code}:\n${lab.stderrTail.join('\n')}`);
}

d('scale bench: each node\'s kernel read from outside the proxy (bench/scale/kernel-state.ts)', () => {
  let cp: ControlPlane;
  const labs: Lab[] = [];
  const want = expectedTable();

  beforeAll(async () => {
    cp = await startControlPlane({ log: () => {} });
    await createObjects(cp);
    // The API server's own `kubernetes` service is in every proxy's table too: expected as the API has it.
    const k = (await cp.request('GET', '/api/v1/namespaces/default/services/kubernetes')).body;
    const slices = (await cp.request('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes')).body.items as any[];
    for (const p of k.spec.ports) {
      const eps = slices.flatMap((s) => s.endpoints ?? [])
        .filter((e: any) => e.conditions?.ready !== false)
        .map((e: any) => `${b(e.addresses[0])}:${slices[0].ports.find((sp: any) => sp.name === p.name).port}`);
      want.set(`${b(k.spec.clusterIP)}:${p.port}/${p.protocol}`, eps.sort());
    }
  }, 180_000);

  afterAll(async () => {
    for (const l of labs) await l.stop();
    await cp?.stop();
  }, 60_000);

  const newLab = async (tag: string) => {
    const l = await Lab.create(tag, Number(new URL(cp.server).port));
    labs.push(l);
    return l;
  };

  test('the expected table: every cluster IP and port, [] without endpoints, IPv6 bracketed', () => {
    expect(want.get('10.96.0.10:80/TCP')).toEqual(['10.244.1.10:8080', '10.244.1.11:8080', '10.244.2.10:8080']);
    expect(want.get('10.96.0.10:53/UDP')).toEqual(['10.244.1.10:5353', '10.244.1.11:5353', '10.244.2.10:5353']);
    expect(want.get('10.96.0.20:80/TCP')).toEqual([]);
    expect(want.get('[fd00:10:96::40]:80/TCP')).toEqual(['[fd00:244:1::40]:8080', '[fd00:244:2::40]:8080']);
    expect(want.size).toBe(9); // with the API server's `kubernetes` service
  });

  test('kpng --to nft: the table read from its nftables tables; a pick slot deleted behind its back is reported', async () => {
    const lab = await newLab('nft');
    lab.startProxy([NODE, CLI, 'kube', '--kubeconfig', cp.kubeconfigPath, '--node', 'n1', '--to', 'nft', '--cluster-cidr', POD_CIDRS, '--once']);
    await exited(lab);
    const place = { netns: lab.netns };
    const got = await readClusterIps('kpng-nft', place);
    expect(diffTables(want, got)).toEqual([]);
    expect(show(got)).toBe(show(want));

    // The check can fail: slot 0 of web's TCP port removed from whichever picks map holds it.
    const listing = JSON.parse(inNs(lab, ['nft', '-j', 'list', 'table', 'ip', 'kpng'])).nftables as any[];
    const map = listing.find((o) => o.map?.elem?.some((e: any) => JSON.stringify(e[0]) === JSON.stringify({ concat: ['10.96.0.10', 'tcp', 80, 0] })))?.map;
    expect(map?.name).toMatch(/^picks-vip-\d+$/);
    const gone = map.elem.find((e: any) => JSON.stringify(e[0]) === JSON.stringify({ concat: ['10.96.0.10', 'tcp', 80, 0] }))[1].concat as [string, number];
    inNs(lab, ['nft', 'delete', 'element', 'ip', 'kpng', map.name, '{ 10.96.0.10 . tcp . 80 . 0 }']);
    const broken = await readClusterIps('kpng-nft', place);
    const lines = diffTables(want, broken);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^10\.96\.0\.10:80\/TCP: endpoints differ: expected .* got /);
    expect(broken.get('10.96.0.10:80/TCP')).toEqual([HOLE, ...want.get('10.96.0.10:80/TCP')!.filter((e) => e !== `${gone[0]}:${gone[1]}`)].sort());
  }, 120_000);

  test('upstream kube-proxy (nftables mode): the table read from its ip and ip6 kube-proxy tables', async () => {
    const bin = buildKubeProxy();
    const lab = await newLab('up');
    lab.startProxy(upstream(bin).argv(cp.kubeconfigPath, 'n1', POD_CIDRS));
    const got = await readUntil('upstream-nft', { netns: lab.netns }, want, lab, 90_000);
    expect(show(got)).toBe(show(want));
  }, 300_000);

  dEbpf('kpng --to ebpf', () => {
    let lab: Lab;
    const net = new NetLab('ksk');
    const pinDir = `/sys/fs/bpf/${net.name('pins')}`;
    let cgroup = '';

    beforeAll(async () => {
      cgroup = net.cgroup('cg');
      lab = await newLab('ebpf');
      // nsenter (not ip netns exec): /sys stays, with the cgroup and bpffs mounts the backend uses.
      lab.startProxy([NODE, CLI, 'kube', '--kubeconfig', cp.kubeconfigPath, '--node', 'n1', '--to', 'ebpf', '--cluster-cidr', POD_CIDRS,
        '--cgroup', cgroup, '--bpffs', pinDir, '--once'], true);
      await exited(lab);
    }, 120_000);

    afterAll(async () => {
      try { await ebpfCleanup(pinDir); } catch { /* nothing pinned */ }
      net.destroy();
    }, 60_000);

    test('the socket LB\'s maps hold every cluster IP (and the external IP, which the reader leaves out)', async () => {
      const entries = await dumpSocketLb({ pinDir });
      const key = (e: { addr: string; port: number; proto: string | number }) => `${b(e.addr)}:${e.port}/${e.proto}`;
      const byKey = new Map(entries.map((e) => [key(e), e]));
      for (const [k, eps] of want) {
        const e = byKey.get(k);
        expect(e && { k, refuse: e.refuse || e.count === 0, backends: [...e.backends].sort(), missing: e.missing }).toEqual({ k, refuse: eps.length === 0, backends: eps, missing: [] });
      }
      expect(byKey.get('192.168.60.20:80/UDP')?.backends).toEqual(['10.244.2.60:8080']);
      expect(byKey.get('10.96.0.30:80/TCP')?.affinity).toBe(60);
    });

    test('readClusterIps: the table read from the maps, not from the nft part (whose vips map is flushed here)', async () => {
      const place = { netns: lab.netns, pinDir };
      expect(show(await readClusterIps('kpng-ebpf', place))).toBe(show(want));
      // The nft part alone holds the same table...
      expect(diffTables(want, await readClusterIps('kpng-nft', place))).toEqual([]);
      // ...until its dispatch is gone: then only the socket LB's maps still say where connections go.
      for (const f of ['ip', 'ip6']) inNs(lab, ['nft', 'flush', 'map', f, 'kpng', 'vips']);
      expect(diffTables(want, await readClusterIps('kpng-nft', place)).length).toBeGreaterThan(0);
      expect(diffTables(want, await readClusterIps('kpng-ebpf', place))).toEqual([]);
    });
  });

  test('a kube-proxy-shaped table with a numgen value that has no endpoint chain: the hole is reported', async () => {
    const lab = await newLab('hole');
    inNs(lab, ['nft', '-f', '-'], `
table ip kube-proxy {
  set cluster-ips { type ipv4_addr; elements = { 10.96.9.1 }; }
  map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
  map no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict; }
  chain reject-chain {
    reject
  }
  chain endpoint-a {
    meta l4proto tcp dnat to 10.244.9.1:8080
  }
  chain endpoint-b {
    meta l4proto tcp dnat to 10.244.9.2:8080
  }
  chain mark-for-masquerade {
    meta mark set meta mark | 0x4000
  }
  chain service-x {
    ip daddr 10.96.9.1 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
    numgen random mod 3 vmap { 0 : goto endpoint-a, 1 : goto endpoint-b }
  }
  chain service-y {
    meta l4proto udp dnat ip addr . port to numgen random mod 2 map { 0 : 10.244.9.3 . 53, 1 : 10.244.9.4 . 53 }
  }
  chain services {
    ip daddr . meta l4proto . th dport vmap @service-ips
  }
  chain nat-output {
    type nat hook output priority -100; policy accept;
    jump services
  }
  chain nat-prerouting {
    type nat hook prerouting priority -100; policy accept;
    jump services
  }
}
add element ip kube-proxy service-ips { 10.96.9.1 . tcp . 80 : goto service-x, 10.96.9.1 . udp . 53 : goto service-y }
add element ip kube-proxy no-endpoint-services { 10.96.9.1 . tcp . 81 : goto reject-chain }
`);
    const got = await readClusterIps('upstream-nft', { netns: lab.netns });
    expect(Object.fromEntries(got)).toEqual({
      '10.96.9.1:80/TCP': [HOLE, '10.244.9.1:8080', '10.244.9.2:8080'],
      '10.96.9.1:53/UDP': ['10.244.9.3:53', '10.244.9.4:53'],
      '10.96.9.1:81/TCP': [],
    });
    const want2: ClusterIpTable = new Map([['10.96.9.1:80/TCP', ['10.244.9.1:8080', '10.244.9.2:8080', '10.244.9.3:8080']], ['10.96.9.1:53/UDP', ['10.244.9.3:53', '10.244.9.4:53']], ['10.96.9.1:81/TCP', []]]);
    expect(diffTables(want2, got)).toEqual([
      `10.96.9.1:80/TCP: endpoints differ: expected 10.244.9.1:8080, 10.244.9.2:8080, 10.244.9.3:8080 got ${HOLE}, 10.244.9.1:8080, 10.244.9.2:8080 (missing 10.244.9.3:8080; extra ${HOLE})`,
    ]);
  }, 60_000);
});

test('diffTables: one endpoint missing, a missing and an extra service, [] against endpoints', () => {
  const want: ClusterIpTable = new Map([
    ['10.96.0.10:80/TCP', ['10.244.1.10:8080', '10.244.1.11:8080']],
    ['10.96.0.20:80/TCP', []],
    ['[fd00::1]:53/UDP', ['[fd00:244::1]:53']],
  ]);
  expect(diffTables(want, new Map(want))).toEqual([]);
  const got: ClusterIpTable = new Map([
    ['10.96.0.10:80/TCP', ['10.244.1.10:8080']],
    ['10.96.0.20:80/TCP', ['10.244.9.9:80']],
    ['10.96.0.99:80/TCP', []],
  ]);
  expect(diffTables(want, got)).toEqual([
    '10.96.0.10:80/TCP: endpoints differ: expected 10.244.1.10:8080, 10.244.1.11:8080 got 10.244.1.10:8080 (missing 10.244.1.11:8080; extra none)',
    '10.96.0.20:80/TCP: endpoints differ: expected none got 10.244.9.9:80 (missing none; extra 10.244.9.9:80)',
    '10.96.0.99:80/TCP: extra service (got none)',
    '[fd00::1]:53/UDP: missing service (expected [fd00:244::1]:53)',
  ]);
});

// The objects document's typed rules (src/aggregator/rules.ts) and interval sets, in a real kernel:
// 1. every kind of match and verdict, sent through the aggregator, is listed by `nft` as the rule a
//    person would have written (so the encoding is the one nft itself uses);
// 2. real packets: a server namespace with two clients; a firewall producer's typed rules drop one
//    client's network (an interval set), reset TCP to one port, and count; changing the interval
//    set's ranges through the aggregator's diff moves the client in and out; patches (incremental
//    changes) add a set, a rule and one address, then take the address out.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';
import { Aggregator } from '../../src/aggregator';
import { nativeTransport } from '../../src/nft/transport';
import { parseObjects } from '../../src/aggregator/objects';
import { parsePatch } from '../../src/aggregator/patch';
import { Netns, sh } from '../helpers/netns';
import { gated, need } from '../helpers/gate';

const d = gated(need.netns(), need.native()).describe;
const LAB = path.join(__dirname, 'lab');

const ALL_KINDS = `
tables:
  - family: inet
    name: fw
    sets:
      - { name: deny, type: ipv4_addr, flags: [interval], elements: [10.0.0.0/8, 192.168.1.1-192.168.1.9, 192.168.1.10, 1.2.3.4] }
      - { name: deny6, type: ipv6_addr }
      - { name: allowed, type: [ipv4_addr, inet_proto, inet_service] }
      - { name: ports, type: inet_service, flags: [interval], elements: [22, 1000-2000] }
      - { name: svc, type: [inet_proto, inet_service], data: verdict, elements: [{ key: [tcp, 80], verdict: accept }] }
    chains:
      - name: in
        hook: input
        rules:
          - { match: { iifname: lo }, verdict: accept }
          - { match: { iifname: "veth*", oifname: "!eth0" }, counter: true }
          - { match: { ctState: [established, related] }, verdict: accept }
          - { match: { saddr: "@deny" }, counter: true, log: { prefix: "deny: " }, verdict: drop }
          - { match: { saddr: "!@deny6" }, verdict: continue }
          - { match: { saddr: 10.1.0.0/16, daddr: 10.2.3.0/25, protocol: tcp, dport: 22 }, verdict: { reject: tcp-reset } }
          - { match: { protocol: udp, sport: 1000-2000, dport: "!53" }, verdict: reject }
          - { match: { dport: "!1000-2000" }, verdict: { reject: admin-prohibited } }
          - { match: { mark: "0x10/0xff" }, verdict: { jump: other } }
          - { match: { mark: 5 }, verdict: { goto: other } }
          - { match: { lookup: { keys: [saddr, protocol, dport], set: allowed } }, verdict: accept }
          - { match: { daddr: 10.9.0.0/16, lookup: { keys: [saddr, protocol, dport], set: allowed, negate: true } }, log: { group: 3 } }
          - { match: { dport: "@ports" }, verdict: { vmap: { keys: [protocol, dport], map: svc } } }
          - { match: { saddr: "2001:db8::1" }, verdict: return }
      - name: other
        rules:
          - { counter: true, verdict: return }
`;

/** What nft prints for ALL_KINDS (rules and set elements). */
const EXPECTED_LINES = [
  'elements = { 1.2.3.4, 10.0.0.0/8, 192.168.1.1-192.168.1.10 }',
  'elements = { 22, 1000-2000 }',
  'elements = { tcp . 80 : accept }',
  'iifname "lo" accept',
  'iifname "veth*" oifname != "eth0" counter packets 0 bytes 0',
  'ct state established,related accept',
  'ip saddr @deny counter packets 0 bytes 0 log prefix "deny: " drop',
  'ip6 saddr != @deny6 continue',
  'ip saddr 10.1.0.0/16 ip daddr 10.2.3.0/25 tcp dport 22 reject with tcp reset',
  'udp sport 1000-2000 udp dport != 53 reject',
  'th dport != 1000-2000 reject with icmpx admin-prohibited',
  'meta mark & 0x000000ff == 0x00000010 jump other',
  'meta mark 0x00000005 goto other',
  'ip saddr . meta l4proto . th dport @allowed accept',
  'ip daddr 10.9.0.0/16 ip saddr . meta l4proto . th dport != @allowed log group 3',
  'th dport @ports meta l4proto . th dport vmap @svc',
  'ip6 saddr 2001:db8::1 return',
  'counter packets 0 bytes 0 return',
];

/** `nft list` output as trimmed lines, set elements joined back onto one line. */
function lines(text: string): string[] {
  return text.replace(/,\n\s+/g, ', ').split('\n').map((l) => l.trim()).filter(Boolean);
}

d('typed rules in the kernel', () => {
  test('every match and verdict is listed by nft as the rule a person would write', async () => {
    const ns = new Netns('kba-rules');
    const agg = new Aggregator({ transport: nativeTransport({ netns: ns.path }), minIntervalMs: 0 });
    try {
      await agg.connect('fw').declare(parseObjects(parse(ALL_KINDS)));
      const got = lines(ns.nft('list', 'table', 'inet', 'fw'));
      const rules = got.filter((l) => !/^(table|set|map|chain|type|flags|\}|policy)/.test(l));
      expect(rules).toEqual(EXPECTED_LINES);
    } finally {
      agg.close();
      ns.destroy();
    }
  });

  test('the docs/aggregator.md example (examples/aggregator/denylist.yaml) is taken by the kernel', async () => {
    const ns = new Netns('kba-example');
    const agg = new Aggregator({ transport: nativeTransport({ netns: ns.path }), minIntervalMs: 0 });
    try {
      const doc = parse(fs.readFileSync(path.join(__dirname, '../../examples/aggregator/denylist.yaml'), 'utf8'));
      await agg.connect('denylist').declare(parseObjects(doc));
      const got = lines(ns.nft('list', 'table', 'ip', 'denylist'));
      expect(got).toContain('elements = { 192.0.2.0/24, 198.51.100.7, 203.0.113.10-203.0.113.20 }');
      expect(got).toContain('ip saddr @deny counter packets 0 bytes 0 drop comment "deny-list"');
      expect(got).toContain('tcp dport 23 log prefix "telnet: " reject with tcp reset comment "no-telnet"');
    } finally {
      agg.close();
      ns.destroy();
    }
  });
});

const firewall = (deny: string[]) => `
tables:
  - family: ip
    name: fw
    sets:
      - name: deny
        type: ipv4_addr
        flags: [interval]
        elements: [${deny.map((x) => `"${x}"`).join(', ')}]
    chains:
      - name: in
        hook: input
        type: filter
        priority: 0
        rules:
          - { match: { ctState: [established, related] }, verdict: accept }
          - { comment: deny, match: { saddr: "@deny" }, counter: true, verdict: drop }
          - { comment: no-9090, match: { protocol: tcp, dport: 9090 }, counter: true, verdict: { reject: tcp-reset } }
`;

d('typed rules with real packets (a server and two clients)', () => {
  let srv: Netns, c1: Netns, c2: Netns;
  let server: ChildProcess;
  let agg: Aggregator;

  const probe = (from: Netns, host: string, port: number) => new Promise<{ ok: boolean; err?: string }>((resolve, reject) => {
    execFile('ip', ['netns', 'exec', from.name, process.execPath, path.join(LAB, 'probe.js'), 'tcp', host, String(port), '1', '700'], (e, out) => {
      if (e) return reject(e);
      resolve(JSON.parse(out.trim().split('\n')[0]) as { ok: boolean; err?: string });
    });
  });
  const counter = (comment: string): number => {
    const l = srv.nft('list', 'chain', 'ip', 'fw', 'in').split('\n').find((x) => x.includes(`comment "${comment}"`)) ?? '';
    return Number(/packets (\d+)/.exec(l)?.[1] ?? NaN);
  };

  beforeAll(async () => {
    srv = new Netns('kba-srv');
    c1 = new Netns('kba-c1');
    c2 = new Netns('kba-c2');
    // srv 10.1.0.1/24 <-> c1 10.1.0.2; srv 10.2.0.1/24 <-> c2 10.2.0.2
    for (const [c, n] of [[c1, 1], [c2, 2]] as const) {
      const a = `kba${n}${srv.name.slice(-4)}`, b = `kbb${n}${srv.name.slice(-4)}`;
      sh('ip', ['link', 'add', a, 'netns', srv.name, 'type', 'veth', 'peer', 'name', b, 'netns', c.name]);
      srv.exec('ip', ['addr', 'add', `10.${n}.0.1/24`, 'dev', a]);
      srv.exec('ip', ['link', 'set', a, 'up']);
      c.exec('ip', ['addr', 'add', `10.${n}.0.2/24`, 'dev', b]);
      c.exec('ip', ['link', 'set', b, 'up']);
    }
    server = spawn('ip', ['netns', 'exec', srv.name, process.execPath, path.join(LAB, 'echo-server.js'), 'srv', '8080,9090'], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', (b: Buffer) => { if (b.toString().includes('ready')) resolve(); });
      server.once('exit', (c) => reject(new Error(`echo server exited ${c}`)));
    });
    agg = new Aggregator({ transport: nativeTransport({ netns: srv.path }), minIntervalMs: 0 });
  }, 30000);

  afterAll(() => {
    agg?.close();
    server?.kill();
    for (const n of [srv, c1, c2]) n?.destroy();
  });

  test('an interval set drops one client\'s network; a typed reject resets TCP; counters count', async () => {
    expect((await probe(c1, '10.1.0.1', 8080)).ok).toBe(true);
    const fw = agg.connect('fw');
    await fw.declare(parseObjects(parse(firewall(['10.1.0.0/24', '192.0.2.1']))));
    expect(await probe(c1, '10.1.0.1', 8080)).toMatchObject({ ok: false, err: 'timeout' });
    expect((await probe(c2, '10.2.0.1', 8080)).ok).toBe(true);
    expect(await probe(c2, '10.2.0.1', 9090)).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    expect(counter('deny')).toBeGreaterThan(0);
    expect(counter('no-9090')).toBe(1);

    // The diff moves the interval's elements: c1's network out of the set, then in again as a /16.
    await fw.declare(parseObjects(parse(firewall(['192.0.2.1']))));
    expect((await probe(c1, '10.1.0.1', 8080)).ok).toBe(true);
    const r = await fw.declare(parseObjects(parse(firewall(['10.0.0.0/8', '192.0.2.1']))));
    expect(r.ops).toBe(1); // one element op: the new range's start and end elements
    expect(await probe(c1, '10.1.0.1', 8080)).toMatchObject({ ok: false, err: 'timeout' });
    expect(await probe(c2, '10.2.0.1', 8080)).toMatchObject({ ok: false, err: 'timeout' });
    const narrowed = await fw.declare(parseObjects(parse(firewall(['10.2.0.0/16', '192.0.2.1']))));
    expect(narrowed.ops).toBe(2); // delete 10.0.0.0..; add 10.2.0.0..
    expect((await probe(c1, '10.1.0.1', 8080)).ok).toBe(true);
    expect(await probe(c2, '10.2.0.1', 8080)).toMatchObject({ ok: false, err: 'timeout' });
    expect(lines(srv.nft('list', 'set', 'ip', 'fw', 'deny'))).toContain('elements = { 10.2.0.0/16, 192.0.2.1 }');
  }, 60000);

  test('patches: a block set and its rule added, one address in, then out, each a small batch', async () => {
    const fw = agg.connect('patcher');
    await fw.declare(parseObjects(parse('tables: [{ family: ip, name: patched, chains: [{ name: in, hook: input, priority: -10 }] }]')));
    expect((await probe(c1, '10.1.0.1', 8080)).ok).toBe(true);
    const block = { tables: [{ family: 'ip', name: 'patched', sets: [{ name: 'block', type: 'ipv4_addr' }], chains: [{ name: 'in', rules: [{ match: { saddr: '@block' }, verdict: 'drop' }] }] }] };
    await fw.apply(parsePatch({ set: block }, fw.desired));
    expect((await probe(c1, '10.1.0.1', 8080)).ok).toBe(true); // empty set
    const add = await fw.apply(parsePatch({ set: { tables: [{ family: 'ip', name: 'patched', sets: [{ name: 'block', elements: ['10.1.0.2'] }] }] } }, fw.desired));
    expect(add.ops).toBe(1);
    expect(await probe(c1, '10.1.0.1', 8080)).toMatchObject({ ok: false, err: 'timeout' });
    const del = await fw.apply(parsePatch({ delete: { tables: [{ family: 'ip', name: 'patched', sets: [{ name: 'block', elements: ['10.1.0.2'] }] }] } }, fw.desired));
    expect(del.ops).toBe(1);
    expect((await probe(c1, '10.1.0.1', 8080)).ok).toBe(true);
  }, 30000);
});

// Real packets through rules programmed by the native addon: two network namespaces joined by a veth
// pair; servers in "srv", a client in "cli" whose nat/output chain (programmed with nftApply) DNATs
// service VIPs to the servers, through a verdict map, an anonymous numgen vmap and a DNAT data map.
// Then kube-proxy's UDP conntrack cleanup: a stale UDP flow keeps hitting the old endpoint until
// conntrackDelete removes its entry.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as readline from 'node:readline';
import {
  NFT_REG32, NFT_REG_1, concat, conntrackDelete, expr, ipv4, nftApply, port, proto, u32host,
  type NftOp,
} from '../../src/native/index';
import { nftList } from '../helpers/nft-list';
import { Netns, sh } from '../helpers/netns';
import { gated, need } from '../helpers/gate';

const maybe = gated(need.netns(), need.native(), need.testNative()).describe;
const T = 'kpng';
const d = (x: object) => ({ family: 'ip' as const, table: T, ...x }) as never;

/** A node child process inside a netns, speaking one line per request/response. */
class NodeInNs {
  private proc: ChildProcessWithoutNullStreams;
  private lines: string[] = [];
  private waiters: ((l: string) => void)[] = [];
  constructor(ns: Netns, script: string) {
    this.proc = spawn('ip', ['netns', 'exec', ns.name, process.execPath, '-e', script]);
    readline.createInterface({ input: this.proc.stdout }).on('line', (l) => {
      const w = this.waiters.shift();
      if (w) w(l); else this.lines.push(l);
    });
    this.proc.stderr.on('data', (b) => process.stderr.write(`[${ns.name}] ${b}`));
  }
  next(timeoutMs = 5000): Promise<string> {
    const l = this.lines.shift();
    if (l !== undefined) return Promise.resolve(l);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('timeout waiting for child output')), timeoutMs);
      this.waiters.push((x) => { clearTimeout(t); resolve(x); });
    });
  }
  async ask(line: string): Promise<string> { this.proc.stdin.write(line + '\n'); return this.next(); }
  kill(): void { this.proc.kill('SIGKILL'); }
}

const SERVERS = `
const net = require('net'), dgram = require('dgram');
let up = 0; const ready = () => { if (++up === 4) console.log('ready'); };
for (const [p, name] of [[8080, 'A'], [8081, 'B']]) net.createServer((s) => s.end(name)).listen(p, '10.99.0.2', ready);
for (const [p, name] of [[5353, 'pong-1'], [5354, 'pong-2']]) {
  const u = dgram.createSocket('udp4');
  u.on('message', (m, r) => u.send(name, r.port, r.address));
  u.bind(p, '10.99.0.2', ready);
}`;

// Commands on stdin: "tcp HOST PORT COUNT" -> JSON array of replies; "udp HOST PORT" -> reply (fixed source port).
const CLIENT = `
const net = require('net'), dgram = require('dgram'), rl = require('readline').createInterface({ input: process.stdin });
const u = dgram.createSocket('udp4'); let pending = null;
u.on('message', (m) => { if (pending) { const p = pending; pending = null; p(m.toString()); } });
u.bind(40000);
const once = (host, port) => new Promise((res) => {
  const s = net.connect(+port, host); let d = '';
  s.on('data', (b) => d += b); s.on('end', () => res(d)); s.on('error', (e) => res('ERR ' + e.code));
  s.setTimeout(2000, () => { s.destroy(); res('TIMEOUT'); });
});
rl.on('line', async (l) => {
  const [cmd, host, port, n] = l.split(' ');
  if (cmd === 'tcp') { const out = []; for (let i = 0; i < +n; i++) out.push(await once(host, port)); console.log(JSON.stringify(out)); }
  if (cmd === 'udp') {
    const t = setTimeout(() => { pending = null; console.log('TIMEOUT'); }, 2000);
    pending = (r) => { clearTimeout(t); console.log(r); };
    u.send('ping', +port, host);
  }
});
console.log('ready');`;

function ruleset(): NftOp[] {
  return [
    { op: 'add', table: { family: 'ip', name: T } },
    { op: 'add', chain: d({ name: 'nat-output', hook: 'output', type: 'nat', priority: -100 }) },
    { op: 'add', chain: d({ name: 'svc-tcp' }) },
    { op: 'add', chain: d({ name: 'svc-udp' }) },
    { op: 'add', chain: d({ name: 'ep-a' }) },
    { op: 'add', chain: d({ name: 'ep-b' }) },
    { op: 'add', set: d({ name: 'service-ips', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: 'verdict' }) },
    {
      op: 'add', set: d({
        name: 'dnat-map', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: ['ipv4_addr', 'inet_service'],
      }),
    },
    {
      op: 'add', elements: d({
        set: 'service-ips', elements: [
          { key: concat(ipv4('172.30.0.10'), proto('tcp'), port(80)), verdict: { goto: 'svc-tcp' } },
          { key: concat(ipv4('172.30.0.10'), proto('udp'), port(53)), verdict: { goto: 'svc-udp' } },
        ],
      }),
    },
    {
      op: 'add', elements: d({
        set: 'dnat-map', elements: [{ key: concat(ipv4('172.30.0.20'), proto('tcp'), port(80)), data: concat(ipv4('10.99.0.2'), port(8081)) }],
      }),
    },
    {
      op: 'add', rule: d({
        chain: 'nat-output', comment: 'services', exprs: [
          expr.ipDaddr(NFT_REG32(0)), expr.l4proto(NFT_REG32(1)), expr.thDport(NFT_REG32(2)), expr.vmap(NFT_REG32(0), 'service-ips'),
        ],
      }),
    },
    {
      // dnat to ip daddr . meta l4proto . th dport map @dnat-map
      op: 'add', rule: d({
        chain: 'nat-output', comment: 'dnat map', exprs: [
          expr.ipDaddr(NFT_REG32(0)), expr.l4proto(NFT_REG32(1)), expr.thDport(NFT_REG32(2)),
          { type: 'lookup', sreg: NFT_REG32(0), set: 'dnat-map', dreg: NFT_REG_1 },
          { type: 'nat', nat: 'dnat', family: 'ip', regAddrMin: NFT_REG_1, regProtoMin: NFT_REG32(1) },
        ],
      }),
    },
    { op: 'add', set: d({ name: '__map%d', id: 1, keyType: 'integer', keyLen: 4, dataType: 'verdict', flags: { anonymous: true, constant: true } }) },
    {
      op: 'add', elements: d({
        set: '__map%d', setId: 1, elements: [{ key: u32host(0), verdict: { goto: 'ep-a' } }, { key: u32host(1), verdict: { goto: 'ep-b' } }],
      }),
    },
    {
      op: 'add', rule: d({
        chain: 'svc-tcp', exprs: [
          { type: 'numgen', mode: 'random', mod: 2, dreg: NFT_REG_1 }, { type: 'lookup', sreg: NFT_REG_1, set: '__map%d', setId: 1, dreg: 0 },
        ],
      }),
    },
    { op: 'add', rule: d({ chain: 'ep-a', exprs: [expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')), ...expr.dnatTo('ip', '10.99.0.2', 8080)] }) },
    { op: 'add', rule: d({ chain: 'ep-b', exprs: [expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')), ...expr.dnatTo('ip', '10.99.0.2', 8081)] }) },
    { op: 'add', rule: d({ chain: 'svc-udp', comment: 'udp endpoint', exprs: [expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('udp')), ...expr.dnatTo('ip', '10.99.0.2', 5353)] }) },
  ];
}

maybe('packets through rules programmed by the native addon', () => {
  let cli: Netns, srv: Netns;
  let servers: NodeInNs, client: NodeInNs;

  beforeAll(async () => {
    cli = new Netns('kpng-cli');
    srv = new Netns('kpng-srv');
    const vc = `vc${cli.name.slice(-6)}`, vs = `vs${cli.name.slice(-6)}`;
    sh('ip', ['link', 'add', vc, 'netns', cli.name, 'type', 'veth', 'peer', 'name', vs, 'netns', srv.name]);
    cli.exec('ip', ['addr', 'add', '10.99.0.1/24', 'dev', vc]);
    cli.exec('ip', ['link', 'set', vc, 'up']);
    cli.exec('ip', ['route', 'add', '172.30.0.0/16', 'via', '10.99.0.2']);
    srv.exec('ip', ['addr', 'add', '10.99.0.2/24', 'dev', vs]);
    srv.exec('ip', ['link', 'set', vs, 'up']);
    servers = new NodeInNs(srv, SERVERS);
    client = new NodeInNs(cli, CLIENT);
    expect(await servers.next()).toBe('ready');
    expect(await client.next()).toBe('ready');
  });
  afterAll(() => {
    servers?.kill();
    client?.kill();
    cli?.destroy();
    srv?.destroy();
  });

  test('TCP to a VIP is DNATed through the verdict map and the numgen vmap to both endpoints', async () => {
    // before programming: the VIP leads nowhere (the server namespace has no such address)
    expect(JSON.parse(await client.ask('tcp 10.99.0.2 8080 1'))).toEqual(['A']);
    const r = await nftApply(ruleset(), { netns: cli.path });
    expect(r.messages).toBeGreaterThan(10);
    const replies: string[] = JSON.parse(await client.ask('tcp 172.30.0.10 80 40'));
    expect(new Set(replies)).toEqual(new Set(['A', 'B']));
    // DNAT through a data map (ipv4_addr . inet_service)
    expect(JSON.parse(await client.ask('tcp 172.30.0.20 80 3'))).toEqual(['B', 'B', 'B']);
    expect(cli.nft('list', 'ruleset')).toContain('dnat ip to ip daddr . meta l4proto . th dport map @dnat-map');
  });

  test('conntrackDelete removes the stale UDP flow of a removed endpoint', async () => {
    expect(await client.ask('udp 172.30.0.10 53')).toBe('pong-1');
    // the endpoint moves to :5354; the existing flow (same source port) is pinned by conntrack
    const l = await nftList('ip', T, { netns: cli.path, elements: false });
    const handle = l.rules.find((x) => x.comment === 'udp endpoint')!.handle;
    await nftApply([{
      op: 'replace', rule: d({
        chain: 'svc-udp', handle, comment: 'udp endpoint', exprs: [expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('udp')), ...expr.dnatTo('ip', '10.99.0.2', 5354)],
      }),
    }], { netns: cli.path });
    expect(await client.ask('udp 172.30.0.10 53')).toBe('pong-1');

    // filters that match nothing delete nothing
    expect(await conntrackDelete({ family: 'ip', proto: 'udp', origDst: '172.30.0.99' }, { netns: cli.path })).toBe(0);
    expect(await conntrackDelete({ family: 'ip', proto: 'udp', replySrc: '10.99.0.2', replySport: 9999 }, { netns: cli.path })).toBe(0);
    // kube-proxy: delete entries whose reply source is the removed endpoint
    expect(await conntrackDelete({ family: 'ip', proto: 'udp', replySrc: '10.99.0.2', replySport: 5353 }, { netns: cli.path })).toBe(1);
    expect(await conntrackDelete({ family: 'ip', proto: 'udp', replySrc: '10.99.0.2', replySport: 5353 }, { netns: cli.path })).toBe(0);
    expect(await client.ask('udp 172.30.0.10 53')).toBe('pong-2');
    // by service IP and port (original destination)
    expect(await conntrackDelete({ family: 'ip', proto: 'udp', origDst: '172.30.0.10', dport: 53 }, { netns: cli.path })).toBe(1);
    // TCP entries (from the first test) are untouched by UDP cleanup
    expect(await conntrackDelete({ family: 'ip', proto: 'udp' }, { netns: cli.path })).toBe(0);
  });

  test('conntrackDelete: keep lists, several filters, zones and IPv6, on entries made with conntrack -I', async () => {
    const ct = (...a: string[]) => cli.exec('conntrack', a);
    const insert = (src: string, dst: string, replySrc: string, extra: string[] = []) =>
      ct('-I', '-p', 'udp', '-s', src, '-d', dst, '--sport', '1000', '--dport', '53',
        '-r', replySrc, '-q', src, '--reply-port-src', '5353', '--reply-port-dst', '1000', '-t', '120', ...extra);
    const udpEntries = (family = 'ipv4') => {
      try { return ct('-L', '-f', family, '-p', 'udp').trim().split('\n').filter((l) => l.includes('udp')); } catch { return []; }
    };
    insert('10.0.0.1', '172.30.0.50', '10.99.0.7'); // DNATed to .7
    insert('10.0.0.2', '172.30.0.50', '10.99.0.8'); // DNATed to .8
    insert('10.0.0.3', '172.30.0.60', '172.30.0.60'); // not DNATed
    insert('10.0.0.4', '172.30.0.50', '10.99.0.9', ['-w', '5']); // DNATed, in conntrack zone 5
    ct('-I', '-p', 'udp', '-s', 'fd00::1', '-d', 'fd00:30::50', '--sport', '1000', '--dport', '53',
      '-r', 'fd00:99::7', '-q', 'fd00::1', '--reply-port-src', '5353', '--reply-port-dst', '1000', '-t', '120');
    expect(udpEntries()).toHaveLength(4);

    // After a full sync: DNATed entries whose endpoint is not kept go, the zoned one included; the
    // undnated one and the IPv6 one (another family) stay.
    expect(await conntrackDelete({ family: 'ip', proto: 'udp', keepReplySrc: ['10.99.0.8'] }, { netns: cli.path })).toBe(2);
    const left = udpEntries().join('\n');
    expect(left).toContain('src=10.99.0.8');
    expect(left).toContain('src=172.30.0.60');
    expect(left).not.toContain('src=10.99.0.7');
    expect(left).not.toContain('zone=5');
    // One dump for several filters; an entry matching two is deleted once.
    expect(await conntrackDelete([
      { family: 'ip', proto: 'udp', replySrc: '10.99.0.8' },
      { family: 'ip', proto: 'udp', origDst: '172.30.0.60', dport: 53 },
      { family: 'ip', proto: 'udp', origDst: '172.30.0.60' },
    ], { netns: cli.path })).toBe(2);
    expect(udpEntries()).toHaveLength(0);
    // IPv6: matched by its reply source, the port in network order.
    expect(udpEntries('ipv6')).toHaveLength(1);
    expect(await conntrackDelete({ family: 'ip6', proto: 'udp', replySrc: 'fd00:99::7', replySport: 5354 }, { netns: cli.path })).toBe(0);
    expect(await conntrackDelete({ family: 'ip6', proto: 'udp', replySrc: 'fd00:99::7', replySport: 5353 }, { netns: cli.path })).toBe(1);
    expect(udpEntries('ipv6')).toHaveLength(0);
  });
});

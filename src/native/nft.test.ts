// Programs the REAL kernel (nf_tables) inside throwaway network namespaces through the addon, and
// checks the result with `nft list ruleset` and with nftList().
import { spawnSync } from 'node:child_process';
import {
  CT_STATE, NftBatch, nftCloseSockets, NFT_REG32, ifname, ipv6, NFT_REG_1, RTN, concat, expr, ipv4, nftApply, port, proto, u32host,
  type NftApplyError, type NftElement, type NftOp,
} from './index';
import { nftList, nftListTables } from '../../test/helpers/nft-list';
import { Netns } from '../../test/helpers/netns';
import { gated, need } from '../../test/helpers/gate';

const T = 'kpng';
const fam = 'ip' as const;
const d = (x: object) => ({ family: fam, table: T, ...x });

/** Ruleset text without the ticking element expirations. */
const stable = (s: string) => s.replace(/ expires \S+/g, '');

const maybe = gated(need.netns(), need.testNative()).describe;

function kubeLikeRuleset(): NftOp[] {
  return [
    { op: 'add', table: { family: fam, name: T, comment: 'kpng test' } },
    { op: 'add', chain: d({ name: 'nat-prerouting', hook: 'prerouting', type: 'nat', priority: -100 }) as never },
    { op: 'add', chain: d({ name: 'nat-output', hook: 'output', type: 'nat', priority: -100 }) as never },
    { op: 'add', chain: d({ name: 'nat-postrouting', hook: 'postrouting', type: 'nat', priority: 100 }) as never },
    { op: 'add', chain: d({ name: 'filter-input', hook: 'input', type: 'filter', priority: 0, policy: 'accept' }) as never },
    { op: 'add', chain: d({ name: 'services', comment: 'dispatch' }) as never },
    { op: 'add', chain: d({ name: 'svc-a' }) as never },
    { op: 'add', chain: d({ name: 'ep-a1' }) as never },
    { op: 'add', chain: d({ name: 'ep-a2' }) as never },
    { op: 'add', chain: d({ name: 'reject-chain' }) as never },
    {
      op: 'add', set: d({
        name: 'service-ips', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: 'verdict', comment: 'ClusterIP dispatch',
      }) as never,
    },
    {
      op: 'add', set: d({
        name: 'affinity-a1', keyType: 'ipv4_addr', flags: { dynamic: true, timeout: true }, timeout: 10800_000,
      }) as never,
    },
    {
      op: 'add', set: d({
        name: 'dnat-map', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: ['ipv4_addr', 'inet_service'],
      }) as never,
    },
    { op: 'add', set: d({ name: 'lb-source-ranges', keyType: 'ipv4_addr', flags: { interval: true } }) as never },
    {
      op: 'add', set: d({
        name: 'firewall-allow', keyType: ['ipv4_addr', 'inet_proto', 'inet_service', 'ipv4_addr'], flags: { interval: true },
      }) as never,
    },
    {
      op: 'add', elements: d({
        set: 'service-ips', elements: [
          { key: concat(ipv4('172.30.0.10'), proto('tcp'), port(80)), verdict: { goto: 'svc-a' }, comment: 'ns1/a:http' },
          { key: concat(ipv4('172.30.0.11'), proto('udp'), port(53)), verdict: { jump: 'reject-chain' } },
        ],
      }) as never,
    },
    {
      op: 'add', elements: d({
        set: 'dnat-map', elements: [
          { key: concat(ipv4('172.30.0.12'), proto('tcp'), port(443)), data: concat(ipv4('10.1.0.7'), port(8443)) },
        ],
      }) as never,
    },
    {
      op: 'add', elements: d({
        set: 'lb-source-ranges', elements: [
          { key: ipv4('192.168.0.0') }, { key: ipv4('192.168.1.0'), intervalEnd: true },
        ],
      }) as never,
    },
    {
      op: 'add', elements: d({
        set: 'firewall-allow', elements: [{
          key: concat(ipv4('172.30.0.10'), proto('tcp'), port(80), ipv4('10.0.0.0')),
          keyEnd: concat(ipv4('172.30.0.10'), proto('tcp'), port(80), ipv4('10.0.0.255')),
        }],
      }) as never,
    },
    { op: 'add', elements: d({ set: 'affinity-a1', elements: [{ key: ipv4('10.9.9.9'), timeout: 60_000 }] }) as never },
    // anonymous numgen vmap, created in the same batch and referenced by id
    {
      op: 'add', set: d({
        name: '__map%d', id: 7, keyType: 'integer', keyLen: 4, dataType: 'verdict', flags: { anonymous: true, constant: true },
      }) as never,
    },
    {
      op: 'add', elements: d({
        set: '__map%d', setId: 7, elements: [{ key: u32host(0), verdict: { goto: 'ep-a1' } }, { key: u32host(1), verdict: { goto: 'ep-a2' } }],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'nat-prerouting', comment: 'to services', exprs: [expr.jump('services')],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'services', comment: 'cluster ips', exprs: [
          expr.ipDaddr(NFT_REG32(0)), expr.l4proto(NFT_REG32(1)), expr.thDport(NFT_REG32(2)), expr.vmap(NFT_REG32(0), 'service-ips'),
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'services', comment: 'nodeports', exprs: [
          expr.fibDaddrType(NFT_REG_1), expr.eq(NFT_REG_1, u32host(RTN.local)),
          expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')),
          expr.thDport(NFT_REG_1), { type: 'range', sreg: NFT_REG_1, op: 'eq', from: port(30000), to: port(32767) },
          expr.counter(), { type: 'log', prefix: 'kpng nodeport ' }, expr.ret(),
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'svc-a', comment: 'affinity', exprs: [
          expr.ipSaddr(NFT_REG_1), { type: 'lookup', sreg: NFT_REG_1, set: 'affinity-a1' }, expr.goto('ep-a1'),
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'svc-a', comment: 'ns1/a:http', exprs: [
          { type: 'numgen', mode: 'random', mod: 2, dreg: NFT_REG_1 },
          { type: 'lookup', sreg: NFT_REG_1, set: '__map%d', setId: 7, dreg: 0 },
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'ep-a1', exprs: [
          expr.ipSaddr(NFT_REG_1),
          { type: 'dynset', op: 'update', set: 'affinity-a1', sregKey: NFT_REG_1, timeout: 10800_000 },
          expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')),
          ...expr.dnatTo('ip', '10.1.0.5', 8080),
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'ep-a2', exprs: [expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')), ...expr.dnatTo('ip', '10.1.0.6', 8080)],
      }) as never,
    },
    { op: 'add', rule: d({ chain: 'reject-chain', exprs: [expr.rejectIcmpPortUnreach()] }) as never },
    {
      op: 'add', rule: d({
        chain: 'filter-input', comment: 'established', exprs: [
          expr.ctState(NFT_REG_1),
          { type: 'bitwise', sreg: NFT_REG_1, dreg: NFT_REG_1, len: 4, mask: u32host(CT_STATE.established | CT_STATE.related), xor: u32host(0) },
          expr.neq(NFT_REG_1, u32host(0)), expr.accept(),
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'filter-input', comment: 'misc', exprs: [
          expr.meta('iifname', NFT_REG_1), expr.eq(NFT_REG_1, ifname('eth0')),
          expr.meta('nfproto', NFT_REG_1), expr.eq(NFT_REG_1, new Uint8Array([2])),
          expr.ctOrigDst(NFT_REG_1), expr.eq(NFT_REG_1, ipv4('10.0.0.1')),
          expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')),
          { type: 'limit', rate: 10, unit: 'second', burst: 5 },
          expr.tcpReset(),
        ],
      }) as never,
    },
    {
      op: 'add', rule: d({
        chain: 'nat-postrouting', comment: 'masquerade marked', exprs: [...expr.hasMetaMark(0x4000), expr.masquerade(true)],
      }) as never,
    },
  ];
}

maybe('nftables through the native addon (real kernel, netns)', () => {
  let ns: Netns;
  beforeEach(() => { ns = new Netns(); });
  afterEach(() => { ns.destroy(); });

  test('tables, chains, maps, elements and rules appear as intended', async () => {
    const res = await nftApply(kubeLikeRuleset(), { netns: ns.path });
    expect(res.messages).toBeGreaterThan(30);
    expect(res.bytes).toBeGreaterThan(1000);
    const text = ns.ruleset();
    for (const s of [
      'table ip kpng {',
      'comment "kpng test"',
      'type nat hook prerouting priority dstnat; policy accept;',
      'type filter hook input priority filter; policy accept;',
      'map service-ips {',
      'type ipv4_addr . inet_proto . inet_service : verdict',
      'comment "ClusterIP dispatch"',
      '172.30.0.10 . tcp . 80 comment "ns1/a:http" : goto svc-a',
      '172.30.0.11 . udp . 53 : jump reject-chain',
      'type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service',
      '172.30.0.12 . tcp . 443 : 10.1.0.7 . 8443',
      'flags interval',
      '192.168.0.0/24',
      '172.30.0.10 . tcp . 80 . 10.0.0.0/24',
      'flags dynamic,timeout',
      'timeout 3h',
      'ip daddr . meta l4proto . th dport vmap @service-ips comment "cluster ips"',
      'fib daddr type local tcp dport 30000-32767 counter packets 0 bytes 0 log prefix "kpng nodeport " return',
      'ip saddr @affinity-a1 goto ep-a1',
      'numgen random mod 2 vmap { 0 : goto ep-a1, 1 : goto ep-a2 }',
      'update @affinity-a1 { ip saddr timeout 3h }',
      'meta l4proto tcp dnat to 10.1.0.5:8080',
      'reject',
      'ct state established,related accept comment "established"',
      'meta mark & 0x00004000 != 0x00000000 masquerade fully-random',
      'iifname "eth0" ct original ip daddr 10.0.0.1 meta l4proto tcp limit rate 10/second reject with tcp reset comment "misc"',
      'jump services comment "to services"',
    ]) expect(text).toContain(s);

    const tables = await nftListTables({ netns: ns.path });
    expect(tables).toEqual([expect.objectContaining({ family: 'ip', name: T, comment: 'kpng test' })]);

    const l = await nftList('ip', T, { netns: ns.path });
    expect(l.chains.map((c) => c.name).sort()).toEqual(
      ['ep-a1', 'ep-a2', 'filter-input', 'nat-output', 'nat-postrouting', 'nat-prerouting', 'reject-chain', 'services', 'svc-a']);
    expect(l.chains.find((c) => c.name === 'nat-prerouting')).toMatchObject({ hook: 'prerouting', type: 'nat', priority: -100, policy: 'accept' });
    expect(l.chains.find((c) => c.name === 'services')?.comment).toBe('dispatch');
    const vips = l.sets.find((s) => s.name === 'service-ips')!;
    expect(vips.comment).toBe('ClusterIP dispatch');
    expect(vips.elements).toHaveLength(2);
    const e = vips.elements.find((x) => Buffer.from(x.key).equals(Buffer.from(concat(ipv4('172.30.0.10'), proto('tcp'), port(80)))))!;
    expect(e.verdict).toEqual({ goto: 'svc-a' });
    expect(e.comment).toBe('ns1/a:http');
    const dm = l.sets.find((s) => s.name === 'dnat-map')!;
    expect(Buffer.from(dm.elements[0].data!)).toEqual(Buffer.from(concat(ipv4('10.1.0.7'), port(8443))));
    expect(l.sets.some((s) => s.name.startsWith('__map'))).toBe(true);
    const aff = l.sets.find((s) => s.name === 'affinity-a1')!;
    expect(aff.timeout).toBe(10800_000);
    expect(aff.elements[0].timeout).toBe(60_000);

    const rule = l.rules.find((r) => r.comment === 'cluster ips')!;
    expect(rule.chain).toBe('services');
    expect(rule.handle).toBeGreaterThan(0);
    expect(rule.exprs[0]).toEqual({ type: 'payload', base: 'network', offset: 16, len: 4, dreg: NFT_REG_1 });
    expect(rule.exprs[3]).toEqual({ type: 'lookup', sreg: NFT_REG_1, set: 'service-ips', dreg: 0 });
    const ep = l.rules.find((r) => r.chain === 'ep-a1')!;
    expect(ep.exprs).toContainEqual(expect.objectContaining({ type: 'nat', nat: 'dnat', family: 'ip', regAddrMin: 1, regProtoMin: 2 }));
    expect(ep.exprs).toContainEqual(expect.objectContaining({ type: 'dynset', op: 'update', set: 'affinity-a1', timeout: 10800_000 }));

    // replace and delete by handle, delete/flush elements, flush and destroy
    await nftApply([
      { op: 'replace', rule: d({ chain: 'services', handle: rule.handle, comment: 'cluster ips v2', exprs: rule.exprs as never }) as never },
      { op: 'delete', rule: d({ chain: 'services', handle: l.rules.find((r) => r.comment === 'nodeports')!.handle, exprs: [] }) as never },
      { op: 'delete', elements: d({ set: 'service-ips', elements: [{ key: concat(ipv4('172.30.0.11'), proto('udp'), port(53)) }] }) as never },
      { op: 'flush', set: d({ name: 'dnat-map', keyType: 'ipv4_addr' }) as never },
      { op: 'flush', chain: d({ name: 'reject-chain' }) as never },
      { op: 'destroy', chain: d({ name: 'no-such-chain' }) as never },
      { op: 'insert', rule: d({ chain: 'services', comment: 'first', exprs: [expr.counter()] }) as never },
    ], { netns: ns.path });
    const text2 = ns.ruleset();
    expect(text2).toContain('vmap @service-ips comment "cluster ips v2"');
    expect(text2).not.toContain('comment "cluster ips"');
    expect(text2).not.toContain('30000-32767');
    expect(text2).not.toContain('172.30.0.11');
    expect(text2).not.toContain('172.30.0.12');
    expect(text2).toMatch(/chain reject-chain \{\s*\}/);
    const l2 = await nftList('ip', T, { netns: ns.path, elements: false });
    const services = l2.rules.filter((r) => r.chain === 'services');
    expect(services.map((r) => r.comment)).toEqual(['first', 'cluster ips v2']);
    expect(l2.sets.every((s) => s.elements.length === 0)).toBe(true);

    await nftApply([{ op: 'delete', table: { family: 'ip', name: T } }], { netns: ns.path });
    expect(ns.ruleset().trim()).toBe('');
  });

  test('a failing batch is atomic: nothing applied, the failing object is reported', async () => {
    await nftApply(kubeLikeRuleset(), { netns: ns.path });
    const before = stable(ns.ruleset());
    const ops: NftOp[] = [
      { op: 'add', chain: d({ name: 'svc-new' }) as never },
      { op: 'add', elements: d({ set: 'service-ips', elements: [{ key: concat(ipv4('172.30.0.99'), proto('tcp'), port(80)), verdict: { goto: 'svc-new' } }] }) as never },
      { op: 'add', rule: d({ chain: 'svc-new', comment: 'bad', exprs: [expr.jump('missing-chain')] }) as never },
      { op: 'delete', rule: d({ chain: 'services', handle: 1 }) as never },
      { op: 'add', rule: d({ chain: 'svc-new', comment: 'fine', exprs: [expr.accept()] }) as never },
    ];
    let err: NftApplyError | undefined;
    try { await nftApply(ops, { netns: ns.path }); } catch (e) { err = e as NftApplyError; }
    expect(err).toBeInstanceOf(Error);
    expect(err!.code).toBe('ENOENT');
    expect(err!.errno).toBe(2);
    expect(err!.failed[0]).toMatchObject({ index: 2, op: 'add', errno: 2, code: 'ENOENT' });
    expect(err!.failed[0].object).toContain('svc-new');
    expect(err!.failed[0].object).toContain('"bad"');
    expect(err!.failed.map((f) => f.index)).toEqual([2, 3]); // every bad object is reported
    expect(err!.message).toContain('rule ip kpng svc-new');
    expect(stable(ns.ruleset())).toBe(before);

    // element errors point at the element: `create` of an existing key => EEXIST on element #1
    let err2: NftApplyError | undefined;
    try {
      await nftApply([
        { op: 'create', elements: d({ set: 'service-ips', elements: [
          { key: concat(ipv4('172.30.0.50'), proto('tcp'), port(80)), verdict: 'drop' },
          { key: concat(ipv4('172.30.0.10'), proto('tcp'), port(80)), verdict: 'drop' },
        ] }) as never },
      ], { netns: ns.path });
    } catch (e) { err2 = e as NftApplyError; }
    expect(err2?.code).toBe('EEXIST');
    expect(err2?.failed[0]).toMatchObject({ index: 0, element: 1, code: 'EEXIST' });
    expect(err2?.failed[0].object).toContain('ac1e000a06000000');
    expect(stable(ns.ruleset())).toBe(before);
  });

  test('large element batches are split into several messages of one transaction', async () => {
    const n = 50_000;
    await nftApply([
      { op: 'add', table: { family: fam, name: T } },
      { op: 'add', chain: d({ name: 'target' }) as never },
      { op: 'add', set: d({ name: 'big', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: 'verdict', size: 4 * n }) as never },
    ], { netns: ns.path });
    const elements: NftElement[] = [];
    for (let i = 0; i < n; i++) {
      elements.push({ key: concat(ipv4(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`), proto('tcp'), port(80)), verdict: { goto: 'target' } });
    }
    // encode first, then check the event loop keeps turning while the worker talks to the kernel
    const batch = new NftBatch();
    batch.add({ op: 'add', elements: d({ set: 'big', elements }) as never });
    batch.finish();
    let ticks = 0;
    let spinning = true;
    const spin = () => { ticks++; if (spinning) setImmediate(spin); };
    setImmediate(spin);
    const r = await nftApply(batch, { netns: ns.path });
    spinning = false;
    // A blocking call would resolve before any setImmediate ran; how many ran depends on the machine's load.
    expect(ticks).toBeGreaterThan(0);
    expect(r.messages).toBeGreaterThan(3);
    const l = await nftList('ip', T, { netns: ns.path });
    expect(l.sets[0].elements).toHaveLength(n);

    // a bad element deep inside (index 43210) fails the whole batch and is reported precisely
    const more: NftElement[] = elements.slice(0, 43210).map((e) => ({ ...e, key: Uint8Array.from(e.key) }));
    for (const e of more) (e.key as Uint8Array)[4] = 17; // udp: new keys
    more.push({ key: concat(ipv4('10.200.0.1'), proto('udp'), port(80)), verdict: { goto: 'no-such-chain' } as never });
    let err: NftApplyError | undefined;
    try { await nftApply([{ op: 'add', elements: d({ set: 'big', elements: more }) as never }], { netns: ns.path }); } catch (e) { err = e as NftApplyError; }
    expect(err?.failed[0]).toMatchObject({ index: 0, element: 43210, code: 'ENOENT' });
    expect((await nftList('ip', T, { netns: ns.path })).sets[0].elements).toHaveLength(n);
  });

  test('ip6 and inet families: IPv6 concatenated keys, icmpx reject', async () => {
    await nftApply([
      { op: 'add', table: { family: 'ip6', name: T } },
      { op: 'add', chain: { family: 'ip6', table: T, name: 'svc' } },
      { op: 'add', chain: { family: 'ip6', table: T, name: 'out', hook: 'output', type: 'nat', priority: -100 } },
      { op: 'add', set: { family: 'ip6', table: T, name: 'service-ips', keyType: ['ipv6_addr', 'inet_proto', 'inet_service'], dataType: 'verdict' } },
      { op: 'add', elements: { family: 'ip6', table: T, set: 'service-ips', elements: [
        { key: concat(ipv6('fd00:10:96::a'), proto('tcp'), port(443)), verdict: { goto: 'svc' } }] } },
      { op: 'add', rule: { family: 'ip6', table: T, chain: 'out', exprs: [
        expr.ip6Daddr(NFT_REG32(0)), expr.l4proto(NFT_REG32(4)), expr.thDport(NFT_REG32(5)), expr.vmap(NFT_REG32(0), 'service-ips')] } },
      { op: 'add', rule: { family: 'ip6', table: T, chain: 'svc', exprs: [
        expr.l4proto(NFT_REG_1), expr.eq(NFT_REG_1, proto('tcp')), ...expr.dnatTo('ip6', 'fd00:10:244::5', 8443)] } },
      { op: 'add', table: { family: 'inet', name: T } },
      { op: 'add', chain: { family: 'inet', table: T, name: 'in', hook: 'input', type: 'filter', priority: 0 } },
      { op: 'add', rule: { family: 'inet', table: T, chain: 'in', exprs: [
        expr.thDport(NFT_REG_1), expr.eq(NFT_REG_1, port(9)), expr.rejectIcmpxPortUnreach()] } },
    ], { netns: ns.path });
    const text = ns.ruleset();
    expect(text).toContain('type ipv6_addr . inet_proto . inet_service : verdict');
    expect(text).toContain('fd00:10:96::a . tcp . 443 : goto svc');
    expect(text).toContain('ip6 daddr . meta l4proto . th dport vmap @service-ips');
    expect(text).toContain('dnat to [fd00:10:244::5]:8443');
    expect(text).toContain('th dport 9 reject'); // inet default: icmpx port-unreachable
    const inet = await nftList('inet', T, { netns: ns.path });
    expect(inet.rules[0].exprs).toContainEqual({ type: 'reject', reject: 'icmpx', code: 1 });
    const tables = await nftListTables({ netns: ns.path });
    expect(tables.map((t) => `${t.family} ${t.name}`).sort()).toEqual(['inet kpng', 'ip6 kpng']);
    const l = await nftList('ip6', T, { netns: ns.path });
    expect(Buffer.from(l.sets[0].elements[0].key).subarray(0, 16)).toEqual(Buffer.from(ipv6('fd00:10:96::a')));
  });

  test('errors outside a batch: missing netns, missing table, invalid batch', async () => {
    await expect(nftApply([{ op: 'add', table: { family: 'ip', name: T } }], { netns: '/var/run/netns/kpng-no-such-ns' }))
      .rejects.toMatchObject({ code: 'ENOENT', errno: 2 });
    await expect(nftList('ip', 'no-such-table', { netns: ns.path })).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(nftApply([{ op: 'add', set: { family: 'ip', table: T, name: 's', keyType: 'integer' } }], { netns: ns.path }))
      .rejects.toThrow(/keyLen required/);
    expect(await nftApply([], { netns: ns.path })).toMatchObject({ messages: 0 });
  });
  test('the kept socket: reused after a rejected batch, never carried into a re-created namespace', async () => {
    const table = (name: string): NftOp => ({ op: 'add', table: { family: fam, name } });
    await nftApply([table('a')], { netns: ns.path });
    await expect(nftApply([{ op: 'delete', table: { family: fam, name: 'absent' } }], { netns: ns.path })).rejects.toMatchObject({ code: 'ENOENT' });
    await nftApply([table('b')], { netns: ns.path });
    expect(ns.nft('list', 'tables')).toBe('table ip a\ntable ip b\n');
    // Same path, another namespace: the batch must land in the new one.
    const path = ns.path;
    spawnSync('ip', ['netns', 'del', ns.name]);
    spawnSync('ip', ['netns', 'add', ns.name]);
    await nftApply([table('c')], { netns: path });
    expect(ns.nft('list', 'tables')).toBe('table ip c\n');
    expect(nftCloseSockets()).toBeGreaterThanOrEqual(1);
    expect(nftCloseSockets()).toBe(0);
  });
});

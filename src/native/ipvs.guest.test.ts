// The addon's IPVS (generic netlink), rtnetlink and sysctl calls against a REAL IPVS kernel, each test in
// a throwaway network namespace. Runs inside the qemu guest (hack/qemu/test-guest.sh); ipvsadm and ip
// are used here only to look at the result independently of the addon's own dumps.
import { Netns, sh } from '../../test/helpers/netns';
import { ipvsApply, ipvsConfig, ipvsDump, ipvsDumpDests, ipvsInfo, encodeIpvsOps, type IpvsOp, type IpvsService } from './ipvs';
import { applyAddrs, ensureLink, listAddrs, sysctl } from './rtnl';

const web: IpvsService = { address: '10.96.0.10', protocol: 'tcp', port: 80, scheduler: 'rr' };
const dns: IpvsService = { address: '10.96.0.53', protocol: 'udp', port: 53, scheduler: 'wrr', persistenceTimeout: 600 };
const v6: IpvsService = { address: 'fd00:96::10', protocol: 'tcp', port: 443, scheduler: 'lc' };

describe('IPVS over generic netlink (guest kernel)', () => {
  let ns: Netns;
  const call = () => ({ netns: ns.path });
  const ipvsadm = () => ns.exec('ipvsadm', ['-Ln']);

  beforeEach(() => { ns = new Netns('kbi-ipvs'); });
  afterEach(() => ns.destroy());

  test('info: the kernel has IPVS', async () => {
    const info = await ipvsInfo(call());
    expect(info.version).toMatch(/^1\.2\.\d+$/);
    expect(info.connTableSize).toBeGreaterThan(0);
  });

  test('services and destinations are created, dumped, changed and deleted', async () => {
    const ops: IpvsOp[] = [
      { op: 'addService', service: web },
      { op: 'addDest', service: web, dest: { address: '10.244.1.10', port: 8080, weight: 1 } },
      { op: 'addDest', service: web, dest: { address: '10.244.2.10', port: 8080, weight: 1 } },
      { op: 'addService', service: dns },
      { op: 'addDest', service: dns, dest: { address: '10.244.1.11', port: 5353, weight: 3 } },
      { op: 'addService', service: v6 },
      { op: 'addDest', service: v6, dest: { address: 'fd00:244:1::10', port: 8443, weight: 1 } },
    ];
    const r = await ipvsApply(ops, call());
    expect(r.failed).toEqual([]);
    expect(r.unknown).toBe(false);
    expect(r.messages).toBe(ops.length);

    // ipvsadm sees what the addon programmed.
    const text = ipvsadm();
    expect(text).toMatch(/TCP\s+10\.96\.0\.10:80 rr\n\s+-> 10\.244\.1\.10:8080\s+Masq\s+1/);
    expect(text).toMatch(/UDP\s+10\.96\.0\.53:53 wrr persistent 600\n\s+-> 10\.244\.1\.11:5353\s+Masq\s+3/);
    expect(text).toMatch(/TCP\s+\[fd00:96::10\]:443 lc\n\s+-> \[fd00:244:1::10\]:8443\s+Masq\s+1/);

    const dump = await ipvsDump(call());
    const byAddr = Object.fromEntries(dump.map((s) => [s.address, s]));
    expect(Object.keys(byAddr).sort()).toEqual(['10.96.0.10', '10.96.0.53', 'fd00:96::10']);
    expect(byAddr['10.96.0.10']).toMatchObject({ family: 'ip', protocol: 'tcp', port: 80, scheduler: 'rr', persistenceTimeout: 0 });
    expect(byAddr['10.96.0.10'].dests.map((d) => `${d.address}:${d.port}/${d.weight}/${d.forward}`).sort())
      .toEqual(['10.244.1.10:8080/1/masq', '10.244.2.10:8080/1/masq']);
    expect(byAddr['10.96.0.53']).toMatchObject({ protocol: 'udp', scheduler: 'wrr', persistenceTimeout: 600, netmask: 0xffffffff });
    expect(byAddr['fd00:96::10']).toMatchObject({ family: 'ip6', scheduler: 'lc', netmask: 128 });
    expect(byAddr['fd00:96::10'].dests[0]).toMatchObject({ address: 'fd00:244:1::10', port: 8443, activeConns: 0, inactiveConns: 0 });

    // Change: weight 0 (graceful termination), scheduler + persistence, then deletes.
    const r2 = await ipvsApply([
      { op: 'setDest', service: web, dest: { address: '10.244.2.10', port: 8080, weight: 0 } },
      { op: 'setService', service: { ...web, scheduler: 'sh', persistenceTimeout: 30 } },
      { op: 'delDest', service: dns, dest: { address: '10.244.1.11', port: 5353 } },
      { op: 'delService', service: v6 },
    ], call());
    expect(r2.failed).toEqual([]);
    const after = await ipvsDump(call());
    expect(after.map((s) => s.address).sort()).toEqual(['10.96.0.10', '10.96.0.53']);
    const w = after.find((s) => s.address === '10.96.0.10')!;
    expect(w).toMatchObject({ scheduler: 'sh', persistenceTimeout: 30 });
    expect(w.dests.find((d) => d.address === '10.244.2.10')!.weight).toBe(0);
    expect(after.find((s) => s.address === '10.96.0.53')!.dests).toEqual([]);
    // Services only, without the per-service destination dumps.
    expect((await ipvsDump({ ...call(), dests: false })).every((s) => s.dests.length === 0)).toBe(true);

    await ipvsApply([{ op: 'flush' }], call());
    expect(await ipvsDump(call())).toEqual([]);
  });

  test('firewall-mark services; destinations of chosen services only', async () => {
    const fwm = { address: '0.0.0.0', protocol: 'tcp' as const, port: 0, fwmark: 0x10001, scheduler: 'rr' };
    const r = await ipvsApply([
      { op: 'addService', service: fwm },
      { op: 'addDest', service: fwm, dest: { address: '10.244.1.10', port: 8080, weight: 1 } },
      { op: 'addService', service: web },
      { op: 'addDest', service: web, dest: { address: '10.244.2.10', port: 8080, weight: 1 } },
    ], call());
    expect(r.failed).toEqual([]);
    expect(ipvsadm()).toMatch(/FWM\s+65537 rr\n\s+-> 10\.244\.1\.10:8080\s+Masq\s+1/);
    const only = await ipvsDumpDests([fwm, { ...web, address: '10.96.9.9' }], call());
    expect(only).toHaveLength(1);
    expect(only[0]).toMatchObject({ fwmark: 0x10001, family: 'ip' });
    expect(only[0].dests.map((d) => d.address)).toEqual(['10.244.1.10']);
  });

  test('refused ops are reported by index and the others still apply', async () => {
    const missing: IpvsService = { ...web, address: '10.96.9.9' };
    const r = await ipvsApply([
      { op: 'addService', service: web },
      { op: 'addService', service: web },                                             // exists
      { op: 'addDest', service: missing, dest: { address: '10.244.1.10', port: 80, weight: 1 } }, // no such service
      { op: 'addService', service: { ...dns, scheduler: 'nosuchsched' } },           // no such scheduler
      { op: 'addDest', service: web, dest: { address: '10.244.1.10', port: 8080, weight: 1 } },
      { op: 'delDest', service: web, dest: { address: '10.244.7.7', port: 1 } },       // no such destination
    ], call());
    expect(r.failed.map((f) => [f.index, f.code])).toEqual([[1, 'EEXIST'], [2, 'ESRCH'], [3, 'ENOENT'], [5, 'ENOENT']]);
    expect(r.failed[0].what).toBe('addService tcp 10.96.0.10:80');
    expect(r.failed[1].what).toBe('addDest tcp 10.96.9.9:80 -> 10.244.1.10:80');
    const dump = await ipvsDump(call());
    expect(dump.map((s) => `${s.address}:${s.dests.map((d) => d.address).join(',')}`)).toEqual(['10.96.0.10:10.244.1.10']);
  });

  test('bad input is refused before anything is sent', async () => {
    expect(() => encodeIpvsOps([{ op: 'addService', service: { ...web, port: 70000 } }])).toThrow(/op #0 .*port 70000/);
    await expect(ipvsApply([
      { op: 'addService', service: web },
      { op: 'addDest', service: web, dest: { address: 'fd00::1', port: 80, weight: 1 } },
    ], call())).rejects.toThrow(/op #1 .*family differs/);
    await expect(ipvsApply([{ op: 'addService', service: { ...web, scheduler: 'r r' } }], call())).rejects.toThrow(/scheduler/);
    expect(await ipvsDump(call())).toEqual([]);
  });

  test('a batch of 2,000 services with 5 destinations each goes through in chunks', async () => {
    const ops: IpvsOp[] = [];
    for (let i = 0; i < 2000; i++) {
      const s: IpvsService = { address: `10.97.${i >> 8}.${i & 255}`, protocol: i % 2 ? 'udp' : 'tcp', port: 80, scheduler: 'rr' };
      ops.push({ op: 'addService', service: s });
      for (let j = 0; j < 5; j++) ops.push({ op: 'addDest', service: s, dest: { address: `10.244.${j}.${(i % 250) + 1}`, port: 8080, weight: 1 } });
    }
    const r = await ipvsApply(ops, call());
    expect(r.failed).toEqual([]);
    expect(r.unknown).toBe(false);
    const dump = await ipvsDump(call());
    expect(dump.length).toBe(2000);
    expect(dump.reduce((n, s) => n + s.dests.length, 0)).toBe(10000);
    expect(ipvsadm().split('\n').filter((l) => l.includes('->') && l.includes('Masq')).length).toBe(10000);
  });

  test('timeouts are set and read back', async () => {
    const before = await ipvsConfig(undefined, call());
    expect(before.tcp).toBeGreaterThan(0);
    const after = await ipvsConfig({ tcp: 1800, tcpFin: 10, udp: 30 }, call());
    expect(after).toEqual({ tcp: 1800, tcpFin: 10, udp: 30 });
    expect(ns.exec('ipvsadm', ['-L', '--timeout'])).toMatch(/1800 10 30/);
  });

  test('a dummy link holds service addresses (rtnetlink)', async () => {
    const l1 = await ensureLink('kube-ipvs0', { kind: 'dummy' }, call());
    expect(l1.created).toBe(true);
    const l2 = await ensureLink('kube-ipvs0', { kind: 'dummy' }, call());
    expect(l2).toEqual({ ifindex: l1.ifindex, created: false, up: false });
    await expect(ensureLink('kbi-none', {}, call())).rejects.toMatchObject({ code: 'ENODEV' });

    const add = await applyAddrs([
      { op: 'add', ifindex: l1.ifindex, address: '10.96.0.10' },
      { op: 'add', ifindex: l1.ifindex, address: '10.96.0.10' }, // idempotent (replace)
      { op: 'add', ifindex: l1.ifindex, address: 'fd00:96::10' },
    ], call());
    expect(add.failed).toEqual([]);
    const addrs = await listAddrs(l1.ifindex, call());
    expect(addrs.map((a) => `${a.address}/${a.prefixLength}`).sort()).toEqual(['10.96.0.10/32', 'fd00:96::10/128']);
    // The kernel treats them as local addresses even with the link down (what IPVS needs).
    expect(ns.exec('ip', ['route', 'show', 'table', 'local'])).toContain('local 10.96.0.10 dev kube-ipvs0');
    expect(ns.exec('ip', ['-6', 'route', 'show', 'table', 'local'])).toContain('local fd00:96::10 dev kube-ipvs0');
    // Every link's addresses: loopback is there too.
    expect((await listAddrs(0, call())).some((a) => a.address === '127.0.0.1')).toBe(true);

    const del = await applyAddrs([
      { op: 'del', ifindex: l1.ifindex, address: '10.96.0.10' },
      { op: 'del', ifindex: l1.ifindex, address: '10.96.0.99' },
    ], call());
    expect(del.failed.map((f) => [f.index, f.code, f.what])).toEqual([[1, 'EADDRNOTAVAIL', 'del address 10.96.0.99']]);
    expect((await listAddrs(l1.ifindex, call())).map((a) => a.address)).toEqual(['fd00:96::10']);
  });

  test('sysctls are read and written inside the namespace', async () => {
    const r = await sysctl([['net/ipv4/vs/conntrack', 1], ['net.ipv4.vs.expire_nodest_conn', '1'], ['net/ipv4/vs/nosuch', 1]], call());
    expect(r[0]).toMatchObject({ name: 'net/ipv4/vs/conntrack', before: '0', after: '1' });
    expect(r[1]).toMatchObject({ before: '0', after: '1' });
    expect(r[2].error).toBe('ENOENT');
    expect(ns.exec('sysctl', ['-n', 'net.ipv4.vs.conntrack']).trim()).toBe('1');
    // The guest's own namespace is untouched.
    expect(sh('sysctl', ['-n', 'net.ipv4.vs.conntrack']).trim()).toBe('0');
  });
});

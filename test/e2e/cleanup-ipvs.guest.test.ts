// The IPVS part of the clean-up against a REAL IPVS kernel (inside the qemu guest: hack/qemu/test-guest.sh),
// each test in a kcln- network namespace: virtual services (v4, v6, UDP, a firewall mark), kube-ipvs0 with
// a service address, kpng's companion tables, all made with the addon, the way kpng's IPVS backend and
// upstream's IPVS mode make them. ipvsadm and ip only look at the result.
import { cleanupNode, removeUpstreamRules } from '../../src/cleanup';
import { nftApply } from '../../src/native';
import { ipvsApply, type IpvsService } from '../../src/native/ipvs';
import { applyAddrs, ensureLink } from '../../src/native/rtnl';
import { createLogger } from '../../src/util/log';
import { Netns } from '../helpers/netns';

const web: IpvsService = { address: '10.96.0.10', protocol: 'tcp', port: 80, scheduler: 'rr' };
const dns: IpvsService = { address: '10.96.0.53', protocol: 'udp', port: 53, scheduler: 'rr' };
const v6: IpvsService = { address: 'fd00:96::10', protocol: 'tcp', port: 443, scheduler: 'rr' };
const mark: IpvsService = { address: '0.0.0.0', protocol: 'tcp', port: 0, fwmark: 7, scheduler: 'rr' };
/** Another program's virtual service, in the excluded CIDR. */
const other: IpvsService = { address: '192.168.99.5', protocol: 'tcp', port: 80, scheduler: 'rr' };

const log = createLogger('error', () => {});
// No bpffs in these tests: a pin directory that does not exist is nothing to clean.
const pinDir = '/sys/fs/bpf/kcln-absent';

describe('IPVS clean-up (guest kernel)', () => {
  let ns: Netns;
  const call = () => ({ netns: ns.path });
  const ipvsadm = () => ns.exec('ipvsadm', ['-Ln']);
  const hasLink = () => ns.exec('ip', ['-o', 'link', 'show']).includes('kube-ipvs0');

  beforeEach(async () => {
    ns = new Netns('kcln');
    const r = await ipvsApply([
      ...[web, dns, v6, mark, other].map((service) => ({ op: 'addService' as const, service })),
      { op: 'addDest', service: web, dest: { address: '10.244.1.10', port: 8080, weight: 1 } },
      { op: 'addDest', service: v6, dest: { address: 'fd00:244:1::10', port: 8443, weight: 1 } },
    ], call());
    expect(r.failed).toEqual([]);
  });
  afterEach(() => ns.destroy());

  const addDummy = async () => {
    const link = await ensureLink('kube-ipvs0', { kind: 'dummy' }, call());
    const a = await applyAddrs([{ op: 'add', ifindex: link.ifindex, address: '10.96.0.10' }], call());
    expect(a.failed).toEqual([]);
  };

  test('cleanupNode(kpng): services outside the excluded CIDR, kube-ipvs0 and the companion tables go', async () => {
    await addDummy();
    await nftApply([{ op: 'add', table: { family: 'ip', name: 'kpng-ipvs' } }, { op: 'add', table: { family: 'ip6', name: 'kpng-ipvs' } }], call());
    expect(ipvsadm()).toContain('10.96.0.10:80');

    const report = await cleanupNode({ log, which: 'kpng', pinDir, ipvsExcludeCIDRs: ['192.168.99.0/24'], netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(report.notes).toEqual([]);
    expect(new Set(report.ipvsServices)).toEqual(new Set(['tcp 10.96.0.10:80', 'udp 10.96.0.53:53', 'tcp [fd00:96::10]:443', 'fwmark 7 ip']));
    expect(report.ipvsKept).toEqual(['tcp 192.168.99.5:80']);
    expect(report.links).toEqual(['kube-ipvs0']);
    expect(new Set(report.tables)).toEqual(new Set(['ip kpng-ipvs', 'ip6 kpng-ipvs']));

    const left = ipvsadm();
    expect(left).toContain('192.168.99.5:80');
    expect(left).not.toMatch(/10\.96\.0\.|fd00:96|FWM/);
    expect(hasLink()).toBe(false);
    expect(ns.ruleset()).not.toContain('kpng-ipvs');

    const again = await cleanupNode({ log, which: 'kpng', pinDir, ipvsExcludeCIDRs: ['192.168.99.0/24'], netns: ns.path });
    expect([again.errors, again.ipvsServices, again.links, again.tables]).toEqual([[], [], [], []]);
    expect(again.ipvsKept).toEqual(['tcp 192.168.99.5:80']);
  });

  test('without excluded CIDRs every service goes; a kube-ipvs0 that is no dummy link stays, with a note', async () => {
    ns.exec('ip', ['link', 'add', 'kube-ipvs0', 'type', 'bridge']);
    const report = await cleanupNode({ log, which: 'upstream', netns: ns.path });
    expect(report.errors).toEqual([]);
    expect(report.ipvsServices).toHaveLength(5);
    expect(report.links).toEqual([]);
    expect(report.notes).toEqual(['link kube-ipvs0 left: it is a bridge link, not the dummy kube-proxy makes']);
    expect(ipvsadm()).not.toMatch(/TCP|UDP|FWM/);
    expect(hasLink()).toBe(true);
  });

  test('removeUpstreamRules with keepIpvs (kpng runs the IPVS backend) leaves the services and kube-ipvs0', async () => {
    await addDummy();
    const report = await removeUpstreamRules(log, { keepIpvs: true, netns: ns.path });
    expect(report.errors).toEqual([]);
    expect([report.ipvsServices, report.links]).toEqual([[], []]);
    expect(ipvsadm()).toContain('10.96.0.10:80');
    expect(hasLink()).toBe(true);

    const r2 = await removeUpstreamRules(log, { netns: ns.path });
    expect(r2.errors).toEqual([]);
    expect(r2.ipvsServices).toHaveLength(5);
    expect(r2.links).toEqual(['kube-ipvs0']);
    expect(hasLink()).toBe(false);
  });
});

// hack/cluster/plan.ts per IP family (up.sh --family ipv4|ipv6|dual), and the conformance focus and
// skips that follow the family (hack/conformance/suite.ts).
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import {
  apiServerCertIPs, bridgeSysctls, clusterPlan, cniConfig, dnsFamilyPolicy, familiesOf, hostPort, hostRoutes, IP_FAMILIES, IPFamily,
  kubeletAddress, kubeletConfig, nodeGateways, nodeSysctls, podRoutes, proxyConfig, shellEnv,
} from '../hack/cluster/plan';
import { DEFAULT_FOCUS, DEFAULT_SKIPS, familyFocus, familySkips, featureTagExcept, skipRegex } from '../hack/conformance/suite';

// A CIDR or address as (family, bigint, prefix): enough to check containment and overlap.
function parseIP(ip: string): { v6: boolean; n: bigint } {
  if (!ip.includes(':')) return { v6: false, n: ip.split('.').reduce((a, p) => (a << 8n) + BigInt(Number(p)), 0n) };
  const [head, tail] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  expect(groups).toHaveLength(8);
  return { v6: true, n: groups.reduce((a, g) => (a << 16n) + BigInt(parseInt(g, 16)), 0n) };
}
function cidr(c: string): { v6: boolean; base: bigint; bits: number } {
  const [ip, len] = c.split('/');
  const { v6, n } = parseIP(ip);
  const width = v6 ? 128 : 32;
  const bits = Number(len);
  const mask = ((1n << BigInt(width)) - 1n) ^ ((1n << BigInt(width - bits)) - 1n);
  expect(n & mask).toBe(n); // no host bits set
  return { v6, base: n, bits };
}
function contains(outer: string, inner: string): boolean {
  const o = cidr(outer);
  const i = inner.includes('/') ? cidr(inner) : { ...parseIP(inner), base: parseIP(inner).n, bits: parseIP(inner).v6 ? 128 : 32 };
  if (o.v6 !== i.v6 || i.bits < o.bits) return false;
  const width = o.v6 ? 128 : 32;
  return (i.base >> BigInt(width - o.bits)) === (o.base >> BigInt(width - o.bits));
}
const isV6 = (a: string) => a.includes(':');

describe('cluster plan per IP family', () => {
  test('ipv4 is the default and exactly the plan of before: addresses, CIDRs, routes and sysctls', () => {
    const plan = clusterPlan(2, '/tmp/kc');
    expect(plan).toEqual(clusterPlan(2, '/tmp/kc', 'ipv4'));
    expect(plan).toMatchObject({
      family: 'ipv4', bridgeIP: '172.30.0.1', prefixLength: 24, bridgeAddresses: ['172.30.0.1/24'],
      apiServer: 'https://172.30.0.1:6443', serviceCIDR: '10.96.0.0/16', kubernetesServiceIP: '10.96.0.1',
      clusterCIDR: '10.244.0.0/16', clusterDNS: '10.96.0.10', clusterDNSIPs: ['10.96.0.10'],
    });
    expect(plan.nodes[1]).toMatchObject({ ip: '172.30.0.12', ips: ['172.30.0.12'], podCIDR: '10.244.2.0/24', podCIDRs: ['10.244.2.0/24'], podGateway: '10.244.2.1' });
    expect(nodeSysctls(plan)).toEqual(['net.ipv4.ip_forward=1', 'net.ipv4.conf.all.rp_filter=0', 'net.bridge.bridge-nf-call-iptables=1', 'net.bridge.bridge-nf-call-ip6tables=1']);
    expect(bridgeSysctls(plan)).toEqual([]);
    expect(apiServerCertIPs(plan)).toEqual(['172.30.0.1', '10.96.0.1']);
    expect(kubeletAddress(plan, plan.nodes[0])).toBe('172.30.0.11');
    expect(dnsFamilyPolicy(plan)).toBe('SingleStack');
    const bridge = JSON.parse(cniConfig(plan.nodes[0])).plugins[0];
    expect(bridge.ipam.ranges).toEqual([[{ subnet: '10.244.1.0/24', gateway: '10.244.1.1' }]]);
    expect(bridge.ipam.routes).toEqual([{ dst: '0.0.0.0/0' }]);
  });

  test('ipv6: every address of the plan is IPv6, the API server in brackets in its URL', () => {
    const plan = clusterPlan(3, '/tmp/kc', 'ipv6');
    expect(plan).toMatchObject({
      bridgeIP: 'fd00:30::1', prefixLength: 64, bridgeAddresses: ['fd00:30::1/64'], apiServer: 'https://[fd00:30::1]:6443',
      serviceCIDR: 'fd00:96::/112', kubernetesServiceIP: 'fd00:96::1', clusterCIDR: 'fd00:244::/32', clusterDNS: 'fd00:96::a',
    });
    expect(plan.nodes.map((n) => n.ip)).toEqual(['fd00:30::11', 'fd00:30::12', 'fd00:30::13']);
    expect(plan.nodes.map((n) => n.podCIDR)).toEqual(['fd00:244:1::/64', 'fd00:244:2::/64', 'fd00:244:3::/64']);
    const all = [plan.bridgeIP, plan.kubernetesServiceIP, plan.clusterDNS, ...plan.nodes.flatMap((n) => [...n.ips, ...n.podCIDRs, ...n.podGateways])];
    expect(all.every(isV6)).toBe(true);
    expect(nodeSysctls(plan)).not.toContain('net.ipv4.ip_forward=1');
    expect(nodeSysctls(plan)).toContain('net.ipv6.conf.all.forwarding=1');
    expect(kubeletAddress(plan, plan.nodes[0])).toBe('fd00:30::11');
    const bridge = JSON.parse(cniConfig(plan.nodes[0])).plugins[0];
    expect(bridge.ipam.ranges).toEqual([[{ subnet: 'fd00:244:1::/64', gateway: 'fd00:244:1::1' }]]);
    expect(bridge.ipam.routes).toEqual([{ dst: '::/0' }]);
  });

  test('dual: IPv4 primary; every list has both families, IPv4 first; comma-separated flags', () => {
    const plan = clusterPlan(2, '/tmp/kc', 'dual');
    expect(plan).toMatchObject({
      bridgeIP: '172.30.0.1', apiServer: 'https://172.30.0.1:6443', bridgeAddresses: ['172.30.0.1/24', 'fd00:30::1/64'],
      serviceCIDR: '10.96.0.0/16,fd00:96::/112', clusterCIDR: '10.244.0.0/16,fd00:244::/32',
      kubernetesServiceIP: '10.96.0.1', clusterDNS: '10.96.0.10', clusterDNSIPs: ['10.96.0.10', 'fd00:96::a'],
    });
    expect(plan.nodes[0]).toMatchObject({ ip: '172.30.0.11', ips: ['172.30.0.11', 'fd00:30::11'], podCIDRs: ['10.244.1.0/24', 'fd00:244:1::/64'] });
    expect(kubeletAddress(plan, plan.nodes[0])).toBe('::');
    expect(dnsFamilyPolicy(plan)).toBe('RequireDualStack');
    expect(nodeSysctls(plan)).toEqual(expect.arrayContaining(['net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1']));
    expect(apiServerCertIPs(plan)).toEqual(['172.30.0.1', 'fd00:30::1', '10.96.0.1', 'fd00:96::1']);
    const bridge = JSON.parse(cniConfig(plan.nodes[1])).plugins[0];
    expect(bridge.ipam.ranges).toEqual([
      [{ subnet: '10.244.2.0/24', gateway: '10.244.2.1' }],
      [{ subnet: 'fd00:244:2::/64', gateway: 'fd00:244:2::1' }],
    ]);
    expect(bridge.ipam.routes).toEqual([{ dst: '0.0.0.0/0' }, { dst: '::/0' }]);
    const kubelet = parse(kubeletConfig(plan, plan.nodes[0], '/ca.crt'));
    expect(kubelet).toMatchObject({ address: '::', clusterDNS: ['10.96.0.10'] });
  });

  test.each(IP_FAMILIES.map((f) => [f]))('%s: pod CIDRs inside the cluster CIDR of their family, nothing overlaps, the API server limits hold', (family) => {
    const plan = clusterPlan(9, '/tmp/kc', family as IPFamily);
    const fams = familiesOf(plan.family);
    expect(plan.clusterCIDRs).toHaveLength(fams.length);
    expect(plan.serviceCIDRs.map(isV6)).toEqual(fams.map((f) => f === 'ipv6'));
    for (const n of plan.nodes) {
      expect(n.ips.map(isV6)).toEqual(fams.map((f) => f === 'ipv6'));
      n.podCIDRs.forEach((c, k) => {
        expect(contains(plan.clusterCIDRs[k], c)).toBe(true);
        expect(contains(c, n.podGateways[k])).toBe(true);
        expect(contains(plan.bridgeAddresses[k].replace(/\.1\/24$/, '.0/24').replace(/::1\/64$/, '::/64'), n.ips[k])).toBe(true);
      });
    }
    plan.serviceCIDRs.forEach((s, k) => {
      // kube-apiserver refuses a service CIDR of more than 20 host bits.
      expect((isV6(s) ? 128 : 32) - cidr(s).bits).toBeLessThanOrEqual(20);
      expect(contains(s, apiServerCertIPs(plan)[fams.length + k])).toBe(true);
      expect(contains(s, plan.clusterDNSIPs[k])).toBe(true);
      expect(contains(plan.clusterCIDRs[k], s.split('/')[0])).toBe(false);
    });
    // No two pod CIDRs overlap; the node addresses are distinct.
    const pods = plan.nodes.flatMap((n) => n.podCIDRs);
    for (const a of pods) for (const b of pods) if (a !== b) expect(contains(a, b)).toBe(false);
    expect(new Set(plan.nodes.flatMap((n) => n.ips)).size).toBe(plan.nodes.length * fams.length);
    // The host's own IPv6 network here (fd00::/64) is not the cluster's.
    for (const c of [...plan.clusterCIDRs, ...plan.serviceCIDRs, ...plan.bridgeAddresses]) {
      if (isV6(c)) expect(contains('fd00::/64', c.split('/')[0])).toBe(false);
    }
  });

  test.each(IP_FAMILIES.map((f) => [f]))('%s: routes to every other node\'s pods per family through that node\'s address of the family', (family) => {
    const plan = clusterPlan(3, '/tmp/kc', family as IPFamily);
    const fams = familiesOf(plan.family);
    const routes = podRoutes(plan, plan.nodes[1]);
    expect(routes).toHaveLength(2 * fams.length);
    for (const r of routes) {
      expect(isV6(r.cidr)).toBe(isV6(r.via));
      const owner = plan.nodes.find((n) => n.podCIDRs.includes(r.cidr))!;
      expect(owner.name).not.toBe('kc-node2');
      expect(owner.ips).toContain(r.via);
    }
    expect(hostRoutes(plan)).toHaveLength(3 * fams.length);
    expect(nodeGateways(plan)).toEqual(plan.bridgeAddresses.map((a) => a.split('/')[0]));
    expect(bridgeSysctls(plan).length > 0).toBe(fams.includes('ipv6'));
  });

  test('a family that is not ipv4, ipv6 or dual is refused', () => {
    expect(() => clusterPlan(2, '/tmp/kc', 'ipv5' as IPFamily)).toThrow(/family: ipv5 is not one of ipv4, ipv6, dual/);
  });

  test('hostPort brackets IPv6 only', () => {
    expect(hostPort('10.96.0.1')).toBe('10.96.0.1');
    expect(hostPort('fd00:96::1')).toBe('[fd00:96::1]');
  });

  test('shell env: the scalars of before for ipv4, and per-node lists that bash reads back', () => {
    const env = shellEnv(clusterPlan(2, '/tmp/kc', 'dual'));
    const out = execFileSync('bash', ['-c', `${env}\nprintf '%s|' "$service_cidr" "$cluster_cidr" "\${node_ip_lists[1]}" "\${node_pod_cidr_lists[0]}" "\${node_routes[0]}" "$host_routes" "$cluster_dns_ips" "$kubernetes_service_host"`], { encoding: 'utf8' });
    expect(out.split('|').slice(0, 8)).toEqual([
      '10.96.0.0/16,fd00:96::/112', '10.244.0.0/16,fd00:244::/32', '172.30.0.12,fd00:30::12', '10.244.1.0/24,fd00:244:1::/64',
      '10.244.2.0/24@172.30.0.12 fd00:244:2::/64@fd00:30::12',
      '10.244.1.0/24@172.30.0.11 fd00:244:1::/64@fd00:30::11 10.244.2.0/24@172.30.0.12 fd00:244:2::/64@fd00:30::12',
      '10.96.0.10 fd00:96::a', '10.96.0.1',
    ]);
    const v6 = execFileSync('bash', ['-c', `${shellEnv(clusterPlan(2, '/tmp/kc', 'ipv6'))}\necho "$kubernetes_service_host $api_server"`], { encoding: 'utf8' });
    expect(v6.trim()).toBe('[fd00:96::1] https://[fd00:30::1]:6443');
  });
});

describe('proxy configuration per family', () => {
  const base = fs.readFileSync(path.join(__dirname, '..', 'deploy', 'base', 'config.conf'), 'utf8');

  test('ipv4: the base config.conf unchanged', () => {
    expect(proxyConfig(base, clusterPlan(2, '/tmp/kc', 'ipv4'))).toBe(base);
  });

  test('dual: both cluster CIDRs, nothing else changed', () => {
    const cfg = parse(proxyConfig(base, clusterPlan(2, '/tmp/kc', 'dual')));
    expect(cfg).toEqual({ ...parse(base), clusterCIDR: '10.244.0.0/16,fd00:244::/32' });
  });

  test('ipv6: the IPv6 cluster CIDR, health and metrics on [::] (what kube-proxy listens on for 0.0.0.0)', () => {
    const cfg = parse(proxyConfig(base, clusterPlan(2, '/tmp/kc', 'ipv6')));
    expect(cfg).toEqual({ ...parse(base), clusterCIDR: 'fd00:244::/32', healthzBindAddress: '[::]:10256', metricsBindAddress: '[::]:10249' });
  });

  test('a config without clusterCIDR gets one', () => {
    expect(parse(proxyConfig('kind: KubeProxyConfiguration\n', clusterPlan(1, '/tmp/kc', 'dual'))).clusterCIDR).toBe('10.244.0.0/16,fd00:244::/32');
  });

  test('plan.js proxy-config writes it (proxy.sh uses it); an unknown family is refused', () => {
    const plan = path.join(__dirname, '..', 'dist', 'hack', 'cluster', 'plan.js');
    if (!fs.existsSync(plan)) return; // built by `make build`; the functions above are the logic
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kc-family-'));
    try {
      const file = path.join(dir, 'config.conf');
      fs.writeFileSync(file, base);
      const out = execFileSync(process.execPath, [plan, 'proxy-config', file, '--family', 'dual'], { encoding: 'utf8' });
      expect(parse(out).clusterCIDR).toBe('10.244.0.0/16,fd00:244::/32');
      expect(() => execFileSync(process.execPath, [plan, 'env', '--family', 'ipv5'], { stdio: 'pipe' })).toThrow(/family: ipv5/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('conformance focus and skips per family', () => {
  const dualStackTest = '[sig-network] [Feature:IPv6DualStack] should create service with ipv4,v6 cluster ip';
  const dualStackSctp = '[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: sctp [Feature:SCTPConnectivity]';
  const ipv4Only = '[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]';
  const service = '[sig-network] Services should serve a basic endpoint from pods [Conformance]';
  const runs = (family: 'ipv4' | 'ipv6' | 'dual', name: string) => new RegExp(familyFocus(family)).test(name) && !new RegExp(skipRegex(undefined, family)).test(name);

  test('ipv4: the focus and skips of before', () => {
    expect(familyFocus('ipv4')).toBe(DEFAULT_FOCUS);
    expect(familySkips('ipv4')).toBe(DEFAULT_SKIPS);
    expect(skipRegex()).toBe(skipRegex(undefined, 'ipv4'));
  });

  test('dual adds the dual-stack tests (not those of other features); ipv4 and ipv6 run none of them', () => {
    expect(runs('dual', dualStackTest)).toBe(true);
    expect(runs('dual', dualStackSctp)).toBe(false);
    expect(runs('ipv4', dualStackTest)).toBe(false);
    expect(runs('ipv6', dualStackTest)).toBe(false);
    for (const f of ['ipv4', 'ipv6', 'dual'] as const) expect(runs(f, service)).toBe(true);
    expect(runs('dual', '[sig-network] Services [Feature:TopologyHints] should distribute endpoints evenly')).toBe(false);
  });

  test('ipv6 skips the IPv4-only tests, whatever the focus', () => {
    expect(new RegExp(skipRegex(undefined, 'ipv6')).test(ipv4Only)).toBe(true);
    expect(familySkips('ipv6').map((s) => s.pattern)).toContain(String.raw`\[Feature:Networking-IPv4\]`);
  });

  test('featureTagExcept matches every feature tag but the one (RE2-compatible: no look-ahead)', () => {
    const re = new RegExp(featureTagExcept('IPv6DualStack'));
    expect(featureTagExcept('IPv6DualStack')).not.toMatch(/\(\?[=!<]/);
    for (const tag of ['SCTPConnectivity', 'IPv6', 'IPv6DualStac', 'IPv6DualStackX', 'IPv6DualStackAlphaFeature', 'I', 'Networking-IPv4', 'X']) {
      expect(re.test(`[sig-network] [Feature:${tag}] x`)).toBe(true);
    }
    expect(re.test('[sig-network] [Feature:IPv6DualStack] x')).toBe(false);
    expect(re.test('[sig-network] [FeatureGate:IPv6DualStack] x')).toBe(false);
  });

  test('every family skip has a reason and compiles', () => {
    for (const f of ['ipv4', 'ipv6', 'dual'] as const) {
      for (const s of familySkips(f)) {
        expect(s.reason.length).toBeGreaterThan(10);
        expect(() => new RegExp(s.pattern)).not.toThrow();
      }
    }
  });
});

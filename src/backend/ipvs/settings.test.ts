// kube-proxy's --ipvs-* settings as flags of `--to ipvs`: parsing, validation (errors name the flag), the
// exclusion decision, and the command line as kpng parses it. The kernel side is in
// test/e2e/ipvs-settings.guest.test.ts.
import { registerBuiltinBackends } from '../builtin';
import { parseCli } from '../../cli/args';
import { createLogger } from '../../util/log';
import { ipvsBackend } from './definition';
import { describeTimeouts } from './kernel-settings';
import { excludeCIDRs, hasTimeouts, ipvsSettings, isExcluded, timeoutSeconds } from './settings';

describe('timeouts', () => {
  test('Go durations in whole seconds, truncated as kube-proxy truncates', () => {
    expect(timeoutSeconds('ipvs-tcp-timeout', '900s')).toBe(900);
    expect(timeoutSeconds('ipvs-tcp-timeout', '2m')).toBe(120);
    expect(timeoutSeconds('ipvs-tcp-timeout', '1h0m30s')).toBe(3630);
    expect(timeoutSeconds('ipvs-tcp-timeout', '1500ms')).toBe(1);
    // Below a second is 0: the kernel's value stays, as with kube-proxy.
    expect(timeoutSeconds('ipvs-tcp-timeout', '500ms')).toBe(0);
    expect(timeoutSeconds('ipvs-tcp-timeout', '0s')).toBe(0);
    expect(timeoutSeconds('ipvs-tcp-timeout', '0')).toBe(0);
  });

  test('a bad duration is an error naming the flag', () => {
    expect(() => timeoutSeconds('ipvs-udp-timeout', '-5s')).toThrow(/^--ipvs-udp-timeout: "-5s" is not a duration >= 0/);
    expect(() => timeoutSeconds('ipvs-tcpfin-timeout', '30')).toThrow(/^--ipvs-tcpfin-timeout: "30" is not a duration/);
    expect(() => timeoutSeconds('ipvs-tcp-timeout', 'soon')).toThrow(/^--ipvs-tcp-timeout: "soon"/);
    expect(() => timeoutSeconds('ipvs-tcp-timeout', '100000h')).toThrow(/^--ipvs-tcp-timeout: "100000h" is longer than the kernel accepts/);
  });

  test('set only when one is non-zero; logged before -> after', () => {
    expect(hasTimeouts({ tcp: 0, tcpFin: 0, udp: 0 })).toBe(false);
    expect(hasTimeouts({ tcp: 0, tcpFin: 0, udp: 45 })).toBe(true);
    expect(describeTimeouts({ tcp: 900, tcpFin: 120, udp: 300 }, { tcp: 300, tcpFin: 120, udp: 45 })).toBe('tcp 900s -> 300s, tcpfin 120s, udp 300s -> 45s');
  });
});

describe('exclude CIDRs', () => {
  test('repeated and comma-separated, canonical, host bits allowed', () => {
    expect(excludeCIDRs(['10.1.0.0/16,10.2.3.4/24', ' fd00:1:0::/64 ', ''])).toEqual(['10.1.0.0/16', '10.2.3.4/24', 'fd00:1::/64']);
    expect(excludeCIDRs('192.168.0.0/24')).toEqual(['192.168.0.0/24']);
    expect(excludeCIDRs(undefined)).toEqual([]);
  });

  test('a bad CIDR is an error naming the flag', () => {
    expect(() => excludeCIDRs(['10.1.0.0/16,10.2.0.0'])).toThrow(/^--ipvs-exclude-cidrs: "10.2.0.0" is not a CIDR/);
    expect(() => excludeCIDRs(['10.1.0.0/33'])).toThrow(/"10.1.0.0\/33" is not a CIDR/);
    expect(() => excludeCIDRs(['fd00::/129'])).toThrow(/"fd00::\/129" is not a CIDR/);
  });

  test('the decision: inside any of the CIDRs, same family only; firewall-mark servers never', () => {
    const cidrs = excludeCIDRs(['10.1.0.0/16', '10.2.3.4/24', 'fd00:1::/64']);
    const at = (address: string) => ({ address });
    expect(isExcluded(at('10.1.0.5'), cidrs)).toBe(true);
    expect(isExcluded(at('10.1.255.255'), cidrs)).toBe(true);
    expect(isExcluded(at('10.2.3.200'), cidrs)).toBe(true); // 10.2.3.4/24 is 10.2.3.0/24
    expect(isExcluded(at('10.2.4.1'), cidrs)).toBe(false);
    expect(isExcluded(at('10.0.255.255'), cidrs)).toBe(false);
    expect(isExcluded(at('10.96.0.10'), cidrs)).toBe(false);
    expect(isExcluded(at('fd00:1::abcd'), cidrs)).toBe(true);
    expect(isExcluded(at('fd00:2::1'), cidrs)).toBe(false);
    expect(isExcluded(at('::ffff:10.1.0.5'), cidrs)).toBe(false);
    expect(isExcluded(at('10.1.0.5'), [])).toBe(false);
    // A firewall-mark virtual server has no address of its own (the kernel says 0.0.0.0 or ::).
    expect(isExcluded({ address: '0.0.0.0', fwmark: 0x6b700001 }, excludeCIDRs(['0.0.0.0/0']))).toBe(false);
    expect(isExcluded({ address: '::', fwmark: 7 }, excludeCIDRs(['::/0']))).toBe(false);
    expect(isExcluded(at('0.0.0.0'), excludeCIDRs(['0.0.0.0/0']))).toBe(true);
  });
});

describe('the flags of --to ipvs', () => {
  beforeAll(() => registerBuiltinBackends());

  test('defaults: no strict ARP, timeouts left, nothing excluded', () => {
    const o = parseCli(['file', '--input', 'x.yaml', '--to', 'ipvs']);
    expect(ipvsSettings(o.backendFlags)).toEqual({ strictArp: false, timeouts: { tcp: 0, tcpFin: 0, udp: 0 }, excludeCIDRs: [] });
  });

  test('kube-proxy\'s names and forms: bare --ipvs-strict-arp, --flag=value, repeated lists', () => {
    const o = parseCli(['file', '--input', 'x.yaml', '--to', 'ipvs', '--ipvs-strict-arp', '--ipvs-tcp-timeout=5m', '--ipvs-tcpfin-timeout', '30s',
      '--ipvs-udp-timeout=0s', '--ipvs-exclude-cidrs=10.1.0.0/16', '--ipvs-exclude-cidrs', '10.2.0.0/16,fd00:1::/64']);
    expect(ipvsSettings(o.backendFlags)).toEqual({
      strictArp: true, timeouts: { tcp: 300, tcpFin: 30, udp: 0 }, excludeCIDRs: ['10.1.0.0/16', '10.2.0.0/16', 'fd00:1::/64'],
    });
  });

  test('they belong to --to ipvs', () => {
    expect(() => parseCli(['file', '--input', 'x.yaml', '--to', 'nft', '--ipvs-strict-arp'])).toThrow(/--ipvs-strict-arp applies to --to ipvs, not --to nft/);
  });

  test('a bad value stops the backend before anything is loaded, naming the flag', () => {
    const log = createLogger('error', () => {});
    const create = (flags: Record<string, string | string[]>) => () => ipvsBackend.create({ node: 'n1', log, flags });
    expect(create({ 'ipvs-tcp-timeout': '5 minutes' })).toThrow(/^--ipvs-tcp-timeout: "5 minutes" is not a duration/);
    expect(create({ 'ipvs-exclude-cidrs': ['10.1.0.0/16', 'ten/8'] })).toThrow(/^--ipvs-exclude-cidrs: "ten\/8" is not a CIDR/);
  });

  test('--help lists them', () => {
    const names = (ipvsBackend.flags ?? []).map((f) => f.name);
    expect(names).toEqual(expect.arrayContaining(['ipvs-strict-arp', 'ipvs-tcp-timeout', 'ipvs-tcpfin-timeout', 'ipvs-udp-timeout', 'ipvs-exclude-cidrs']));
    expect(ipvsBackend.flags!.find((f) => f.name === 'ipvs-strict-arp')!.type).toBe('boolean');
  });
});

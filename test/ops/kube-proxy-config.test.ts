// Reading a kubeadm cluster's kube-proxy configuration, and kube-proxy's flags on kpng's command line.
import fs from 'node:fs';
import path from 'node:path';
import { kubeProxySettings, readKubeProxyConfiguration } from '../../src/config/kube-proxy-config';
import { defaultConfiguration, isZero, withDefaults } from '../../src/config/kube-proxy-schema';
import { goDurationString, parseGoDuration } from '../../src/util/duration';
import { resolveKubeProxyArgs, backendForMode } from '../../src/cli/kube-proxy-flags';
import { extractGoFlags } from '../../src/cli/go-flags';
import { KUBE_PROXY_FLAGS } from '../../src/cli/kube-proxy-flag-table';
import { parseCli, UsageError } from '../../src/cli/args';
import { registerBuiltinBackends } from '../../src/backend/builtin';

const FIXTURE = path.join(__dirname, 'fixtures', 'kubeadm-kube-proxy.yaml');
const kubeadm = fs.readFileSync(FIXTURE, 'utf8');
beforeAll(() => registerBuiltinBackends());
const registered = ['routes', 'dump', 'trace', 'nft', 'ebpf', 'ipvs'];
const settings = (text: string) => kubeProxySettings(readKubeProxyConfiguration(text, 'f').user);

test('Go durations, both ways', () => {
  expect(parseGoDuration('30s')).toBe(30000);
  expect(parseGoDuration('1m30s')).toBe(90000);
  expect(parseGoDuration('2h22m')).toBe((2 * 60 + 22) * 60000);
  expect(parseGoDuration('250ms')).toBe(250);
  expect(parseGoDuration('0s')).toBe(0);
  expect(parseGoDuration('24h0m0s')).toBe(86400000);
  expect(parseGoDuration('1.5h')).toBe(5400000);
  expect(parseGoDuration('10')).toBeNull();
  expect(parseGoDuration('-1s')).toBeNull();
  for (const [ms, text] of [[0, '0s'], [250, '250ms'], [1000, '1s'], [1500, '1.5s'], [30000, '30s'], [900000, '15m0s'], [3600000, '1h0m0s'], [86400000, '24h0m0s'], [5400500, '1h30m0.5s']] as const) {
    expect(goDurationString(ms)).toBe(text);
    expect(parseGoDuration(text)).toBe(ms);
  }
});

test('pflag\'s reading of a command line: forms, booleans, lists, maps, shorthand', () => {
  const r = extractGoFlags(['kube', '-v=2', '--masquerade-all=false', '--nodeport-addresses', 'primary', '--nodeport-addresses=10.0.0.0/8,"fd00::/8"',
    '--feature-gates=A=true, B=false', '--kube-api-qps', '0.5', '--oom-score-adj=-0x10', '--conntrack-udp-timeout', '1m30s', '--to', 'nft', '--version=raw', '--', '--v=9'], KUBE_PROXY_FLAGS);
  expect(r.rest).toEqual(['kube', '--to', 'nft', '--', '--v=9']);
  expect(Object.fromEntries(r.values)).toEqual({
    v: 2, 'masquerade-all': false, 'nodeport-addresses': ['primary', '10.0.0.0/8', 'fd00::/8'], 'feature-gates': { A: true, B: false },
    'kube-api-qps': 0.5, 'oom-score-adj': -16, 'conntrack-udp-timeout': 90000, version: 'raw',
  });
  expect(Object.fromEntries(extractGoFlags(['-v4', '-h', '--cleanup', '--version'], KUBE_PROXY_FLAGS).values)).toEqual({ v: 4, help: true, cleanup: true, version: 'true' });
  expect(() => extractGoFlags(['--masquerade-all=maybe'], KUBE_PROXY_FLAGS)).toThrow(/invalid argument "maybe" for "--masquerade-all" flag/);
  expect(() => extractGoFlags(['--conntrack-min', 'lots'], KUBE_PROXY_FLAGS)).toThrow(/"--conntrack-min" flag: expected a whole number/);
  expect(() => extractGoFlags(['--kubeconfig'], KUBE_PROXY_FLAGS)).toThrow(/flag needs an argument: --kubeconfig/);
});

test('kubeadm\'s kube-proxy ConfigMap: upstream\'s defaults for every zero, nothing reported', () => {
  const c = settings(kubeadm);
  expect(c.modeGiven).toBe('');
  expect(c.mode).toBe('iptables');
  expect(c.clusterCIDRs).toEqual(['10.244.0.0/16']);
  expect(c.kubeconfig).toBe('/var/lib/kube-proxy/kubeconfig.conf');
  expect(c.syncPeriodMs).toBeUndefined();
  expect(c.minSyncPeriodMs).toBeUndefined();
  expect(c.metricsBindAddress).toBe('127.0.0.1:10249');
  expect(c.healthzBindAddress).toBe('0.0.0.0:10256');
  expect(c.oomScoreAdj).toBe(-999);
  expect(c.qps).toBe(5);
  expect(c.burst).toBe(10);
  expect(c.contentType).toBe('application/vnd.kubernetes.protobuf');
  expect(c.detectLocalMode).toBe('ClusterCIDR');
  expect(c.conntrack).toEqual({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86400, tcpCloseWaitTimeout: 3600, tcpBeLiberal: false, udpTimeout: undefined, udpStreamTimeout: undefined });
  expect(c.unsupported).toEqual([]);
  expect(readKubeProxyConfiguration(kubeadm, 'f').unknown).toEqual([]);
  // Defaulting the kubeadm file gives what `kube-proxy --write-config-to` writes, but for its own fields.
  const eff = withDefaults(readKubeProxyConfiguration(kubeadm, 'f').user);
  expect({ ...eff, clusterCIDR: '', clientConnection: { ...(eff.clientConnection as object), kubeconfig: '' } }).toEqual({ ...defaultConfiguration(), featureGates: {} });
});

test('set fields: the mode\'s section is read, no-effect and unknown fields are named by path, bad types are errors naming the field', () => {
  const doc = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: " Node-7 "
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
metricsBindAddress: 0.0.0.0:10249
healthzBindAddress: "[::]:10256"
bindAddressHardFail: true
bindAddress: 192.168.1.7
nodePortAddresses: [primary]
featureGates: {SomeGate: true}
enableProfiling: true
detectLocalMode: InterfaceNamePrefix
detectLocal: {interfaceNamePrefix: veth, bridgeInterfaze: x}
nftables: {masqueradeAll: true, syncPeriod: 45s, minSyncPeriod: 250ms, masqueradeBit: 14}
iptables: {masqueradeAll: false, syncPeriod: 5m, localhostNodePorts: true, masqueradeBit: 3}
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 2h, tcpCloseWaitTimeout: 0s, tcpBeLiberal: true, udpTimeout: 30s}
clientConnection: {qps: 50, burst: 100}
logging: {verbosity: 4, format: json, flushFrequency: 1s}
extraThing: 1
`;
  const c = settings(doc);
  expect(c).toMatchObject({
    mode: 'nftables', hostnameOverride: 'node-7', clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'], masqueradeAll: true,
    syncPeriodMs: 45000, minSyncPeriodMs: 250, metricsBindAddress: '0.0.0.0:10249', healthzBindAddress: '[::]:10256', bindAddress: '192.168.1.7',
    bindAddressHardFail: true, nodePortAddresses: ['primary'], detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth', qps: 50, burst: 100,
    logging: { format: 'json', verbosity: 4, vmodule: [] },
    conntrack: { maxPerCore: 0, tcpEstablishedTimeout: 7200, tcpCloseWaitTimeout: undefined, tcpBeLiberal: true, udpTimeout: 30 },
  });
  // iptables.* is another mode's section: not read, not reported; nftables.masqueradeBit is upstream's default.
  expect(c.unsupported).toEqual(['logging.flushFrequency (kpng writes each log line at once)', 'enableProfiling (kpng serves no pprof handler)', 'featureGates.SomeGate (kpng has no feature gates)']);
  expect(readKubeProxyConfiguration(doc, 'f').unknown).toEqual(['detectLocal.bridgeInterfaze', 'extraThing']);
  expect(() => settings(doc.replace('syncPeriod: 45s', 'syncPeriod: soon'))).toThrow(/f: nftables.syncPeriod: "soon" is not a duration/);
  expect(() => settings(doc.replace('bindAddressHardFail: true', 'bindAddressHardFail: yes please'))).toThrow(/bindAddressHardFail: expected true or false/);
  expect(() => settings(doc.replace('maxPerCore: 0', 'maxPerCore: many'))).toThrow(/conntrack.maxPerCore: expected a whole number, got "many"/);
  expect(() => settings(doc.replace('format: json', 'format: xml'))).toThrow(/logging.format: "xml": expected text or json/);
  expect(() => settings('apiVersion: v1\nkind: Pod\n')).toThrow(/no KubeProxyConfiguration found/);
  expect(() => settings(doc.replace('v1alpha1', 'v9'))).toThrow(/apiVersion "kubeproxy.config.k8s.io\/v9" is not supported/);
  expect(() => settings('{{{')).toThrow(/not YAML or JSON/);
  expect(isZero({ a: 0, b: { c: '', d: null, e: '0s' }, f: [] })).toBe(true);
});

test('a whole ConfigMap is accepted (its config.conf)', () => {
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kube-proxy', namespace: 'kube-system' }, data: { 'config.conf': kubeadm, 'kubeconfig.conf': 'x' } };
  expect(settings(JSON.stringify(cm)).clusterCIDRs).toEqual(['10.244.0.0/16']);
});

describe('kube-proxy\'s command line', () => {
  const files: Record<string, string> = {};
  const readFile = (f: string) => { if (!(f in files)) throw Object.assign(new Error('nope'), { code: 'ENOENT' }); return files[f]; };
  const resolve = (argv: string[], invokedAs?: string) => resolveKubeProxyArgs(argv, { registered, readFile, invokedAs });
  beforeAll(() => {
    files['/c.yaml'] = kubeadm.replace('hostnameOverride: ""', 'hostnameOverride: from-file').replace('mode: ""', 'mode: nftables');
    files['/j.yaml'] = kubeadm.replace('contentType: ""', 'contentType: application/json');
    const fast = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclientConnection: {kubeconfig: /k}\nmode: MODE\nnftables:\n  flowtable: {interfaces: [eth0, cni0], packetThreshold: 8}\n';
    files['/fast.yaml'] = fast.replace('MODE', 'nftables');
    files['/fast-ipvs.yaml'] = fast.replace('MODE', 'ipvs');
  });

  test('nftables.flowtable (kpng\'s fast path) becomes the nft backend\'s flags; another backend says it has no effect', () => {
    const r = resolve(['--config', '/fast.yaml']);
    expect(parseCli(r.argv)).toMatchObject({ to: 'nft', backendFlags: { 'nft-flowtable': 'eth0,cni0', 'nft-flowtable-packets': '8' } });
    expect(r.warnings.join('\n')).not.toMatch(/unknown|flowtable/);
    expect(resolve(['--config', '/fast-ipvs.yaml']).warnings.join('\n')).toMatch(/no effect in kpng .*nftables\.flowtable \(only the nft backend has the fast path; the backend is ipvs\)/);
    expect(() => settings('apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nnftables: {flowtable: {interfaces: [auto, eth0]}}\n')).toThrow(/"auto" stands alone/);
    expect(() => settings('apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nnftables: {flowtable: {packetThreshold: -1}}\n')).toThrow(/must be >= 0/);
  });

  test('with --config, the file wins over the flags of the same settings, except --hostname-override and logging flags', () => {
    const r = resolve(['--config=/c.yaml', '--hostname-override=Node-X', '--cluster-cidr', '10.0.0.0/8', '--oom-score-adj', '500', '--proxy-mode=ipvs', '--v=4']);
    expect(r.argv[0]).toBe('kube');
    const opts = parseCli(r.argv);
    expect(opts.command).toBe('kube');
    expect(opts.node).toBe('node-x'); // lower-cased, as upstream does
    expect(opts.model.clusterCIDRs).toEqual(['10.244.0.0/16']);
    expect(opts.to).toBe('nft');
    expect(opts.logLevel).toBe('debug');
    expect(r.logging.verbosity).toBe(4);
    expect(r.ops).toMatchObject({ metricsBindAddress: '127.0.0.1:10249', healthzBindAddress: '0.0.0.0:10256', bindAddressHardFail: false, oomScoreAdj: -999, configFile: '/c.yaml' });
    expect(r.ops.conntrack?.tcpEstablishedTimeout).toBe(86400);
    expect(r.warnings).toEqual([expect.stringMatching(/--config \/c.yaml is given: .* ignores the flags --cluster-cidr, --oom-score-adj, --proxy-mode$/)]);
    expect(opts.kubeContentType).toBe('protobuf');
    // kpng's own flags are not kube-proxy's: they win over the file.
    expect(parseCli(resolve(['--config=/c.yaml', '--to', 'ebpf', '--node', 'n9']).argv)).toMatchObject({ to: 'ebpf', node: 'n9' });
    expect(parseCli(resolve(['--config', '/j.yaml']).argv).kubeContentType).toBe('json');
  });

  test('an IPv6 bindAddress in the file makes the servers\' defaults IPv6 ones; on the command line the defaults stay, as upstream\'s', () => {
    files['/v6.yaml'] = kubeadm.replace('bindAddress: 0.0.0.0', 'bindAddress: "::"');
    expect(files['/v6.yaml']).toContain('bindAddress: "::"');
    expect(resolve(['--config=/v6.yaml']).ops).toMatchObject({ metricsBindAddress: '[::1]:10249', healthzBindAddress: '[::]:10256' });
    files['/v6-set.yaml'] = files['/v6.yaml'].replace('healthzBindAddress: ""', 'healthzBindAddress: "[fd00::1]:10256"');
    expect(resolve(['--config=/v6-set.yaml']).ops).toMatchObject({ metricsBindAddress: '[::1]:10249', healthzBindAddress: '[fd00::1]:10256' });
    expect(resolve(['--bind-address=::']).ops).toMatchObject({ metricsBindAddress: '127.0.0.1:10249', healthzBindAddress: '0.0.0.0:10256' });
  });

  test('the file\'s local-traffic detection, bindAddress and node-port keywords reach the model', () => {
    files['/d.yaml'] = kubeadm.replace('detectLocalMode: ""', 'detectLocalMode: BridgeInterface').replace('bridgeInterface: ""', 'bridgeInterface: cbr0')
      .replace('bindAddress: 0.0.0.0', 'bindAddress: 192.168.1.9').replace('nodePortAddresses: null', 'nodePortAddresses: [primary, localhost, 10.0.0.0/8]');
    const opts = parseCli(resolve(['--config', '/d.yaml']).argv);
    expect(opts.model).toMatchObject({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cbr0', bindAddress: '192.168.1.9' });
    expect(resolve(['--config', '/d.yaml']).warnings).toEqual([expect.stringMatching(/proxy mode not set/)]);
  });

  test('without --config, the flags are the configuration; kube-proxy\'s defaults fill the rest', () => {
    const r = resolve(['--kubeconfig=/k', '--cluster-cidr=10.244.0.0/16', '--proxy-mode=nftables', '--iptables-sync-period=45s', '--masquerade-all', '--kube-api-qps=20', '--kube-api-burst=40', '--master=https://10.0.0.1:6443']);
    const opts = parseCli(r.argv);
    expect(opts).toMatchObject({ command: 'kube', to: 'nft', kubeconfig: '/k', syncPeriodMs: 45000, model: { clusterCIDRs: ['10.244.0.0/16'], masqueradeAll: true } });
    expect(r.kube).toEqual({ master: 'https://10.0.0.1:6443', qps: 20, burst: 40 });
    expect(r.ops).toMatchObject({ oomScoreAdj: -999, conntrack: { maxPerCore: 32768, tcpEstablishedTimeout: 86400 } });
    expect(r.configuration).toMatchObject({ mode: 'nftables', clusterCIDR: '10.244.0.0/16', nftables: { syncPeriod: '45s', masqueradeAll: true }, clientConnection: { qps: 20, burst: 40 } });
    expect(r.warnings).toEqual([]);
  });

  test('kube-proxy\'s way always programs the kernel: mode "" and iptables run nftables, saying so', () => {
    const plain = resolve(['--kubeconfig=/k', '--cluster-cidr=10.244.0.0/16']);
    expect(parseCli(plain.argv)).toMatchObject({ command: 'kube', to: 'nft' });
    expect(plain.warnings).toEqual([expect.stringMatching(/proxy mode not set .*runs its nftables backend \(nft\) and serves node ports as iptables mode does/)]);
    // iptables mode's node ports: every local address, and 127.0.0.1 (localhostNodePorts, true by default there).
    expect(plain.argv).toEqual(expect.arrayContaining(['--nodeport-addresses', 'all', '--localhost-nodeports']));
    expect(resolve(['--proxy-mode=iptables']).warnings).toEqual([expect.stringMatching(/proxy mode iptables: kpng runs its nftables backend \(nft\)/)]);
    expect(resolve(['--proxy-mode=iptables', '--iptables-localhost-nodeports=false']).argv).not.toContain('--localhost-nodeports');
    expect(resolve(['--proxy-mode=nftables']).argv).not.toContain('--localhost-nodeports');
    expect(resolve(['--proxy-mode=nftables']).argv).not.toContain('--nodeport-addresses');
    expect(parseCli(resolve([], '/usr/local/bin/kube-proxy').argv)).toMatchObject({ command: 'kube', to: 'nft' });
    expect(parseCli(resolve(['--config', '/c.yaml']).argv).to).toBe('nft');
    expect(parseCli(resolve(['--proxy-mode=ipvs', '--ipvs-scheduler=lc']).argv)).toMatchObject({ to: 'ipvs', backendFlags: { 'ipvs-scheduler': 'lc' } });
    // kpng's own commands keep kpng's defaults.
    expect(parseCli(resolve(['kube', '--kubeconfig=/k']).argv).to).toBe('routes');
    expect(resolve([]).argv).toEqual([]);
    expect(resolve(['--help']).argv).toEqual(['help']);
    expect(resolve(['file', '-h']).argv).toEqual(['file', '--help']);
    expect(resolve(['--version']).argv).toEqual(['version']);
    expect(resolve(['--version=raw']).action).toBe('version-raw');
    expect(resolve(['--version=raw']).argv).toEqual(['version']);
    // Upstream's two alpha-gated logging flags, accepted at their defaults without the gate, as upstream does.
    expect(resolve(['--log-json-split-stream=false', '--log-json-info-buffer-size=0', '--hostname-override=x']).warnings.join('\n')).toMatch(/--log-json-split-stream \(kpng logs to stderr\), --log-json-info-buffer-size \(kpng logs to stderr\)/);
    expect(resolve(['--write-config-to', '/tmp/x']).action).toBe('write-config');
    expect(resolve(['--cleanup']).action).toBe('cleanup');
    expect(resolve(['--init-only']).action).toBe('init-only');
  });

  test('mode ipvs: kube-proxy\'s IPVS settings, from flags or the file, become the ipvs backend\'s flags', () => {
    const r = resolve(['--proxy-mode=ipvs', '--ipvs-strict-arp', '--ipvs-tcp-timeout=5m', '--ipvs-udp-timeout=1m30s', '--ipvs-exclude-cidrs=10.1.0.0/16,fd00:1::/64', '--ipvs-exclude-cidrs=10.2.0.0/16']);
    expect(r.warnings.join('\n')).not.toMatch(/ipvs-/);
    expect(parseCli(r.argv).backendFlags).toMatchObject({
      'ipvs-strict-arp': true, 'ipvs-tcp-timeout': '300000ms', 'ipvs-tcpfin-timeout': '0s', 'ipvs-udp-timeout': '90000ms', 'ipvs-exclude-cidrs': ['10.1.0.0/16,fd00:1::/64,10.2.0.0/16'],
    });
    // kpng's own command with --to ipvs reads them the same way; zero timeouts and false stay unsaid.
    const k = resolve(['file', '--input', 'x.yaml', '--to', 'ipvs', '--ipvs-tcpfin-timeout', '30s', '--ipvs-tcp-timeout=0s', '--ipvs-strict-arp=false']);
    expect(k.argv).toEqual(['file', '--input', 'x.yaml', '--to', 'ipvs', '--ipvs-tcpfin-timeout', '30000ms']);
    files['/ipvs.yaml'] = kubeadm.replace('mode: ""', 'mode: ipvs').replace('strictARP: false', 'strictARP: true').replace('excludeCIDRs: null', 'excludeCIDRs: [10.3.0.0/16]');
    expect(parseCli(resolve(['--config=/ipvs.yaml']).argv).backendFlags).toMatchObject({ 'ipvs-strict-arp': true, 'ipvs-exclude-cidrs': ['10.3.0.0/16'] });
  });

  test('settings with no effect are named in one warning; kpng\'s commands apply only the conntrack flags given', () => {
    const r = resolve(['--feature-gates=Foo=true', '--profiling', '--iptables-masquerade-bit=14', '--iptables-masquerade-bit=3', '--config-sync-period=1m', '--ipvs-strict-arp', '--log-flush-frequency=1s', '--show-hidden-metrics-for-version=1.36']);
    expect(r.warnings).toHaveLength(2);
    expect(r.warnings[1]).toBe('no effect in kpng (accepted for kube-proxy compatibility): --feature-gates Foo (kpng has no feature gates), --profiling (kpng serves no pprof handler), '
      + '--iptables-masquerade-bit (kpng marks packets its own way), --config-sync-period (kpng\'s watches do not resync), --log-flush-frequency (kpng writes each line at once), '
      + '--show-hidden-metrics-for-version (kpng hides no metric), --ipvs-strict-arp (only the ipvs mode reads it)');
    const f = resolve(['file', '--input', 'x.yaml', '--metrics-bind-address', '', '--healthz-bind-address=127.0.0.1:0', '--conntrack-tcp-timeout-established', '1h', '--conntrack-tcp-be-liberal', '--proxy-mode', 'iptables', '--to', 'routes']);
    expect(f.argv).toEqual(['file', '--input', 'x.yaml', '--to', 'routes']);
    expect(f.ops).toMatchObject({ metricsBindAddress: null, healthzBindAddress: '127.0.0.1:0', conntrack: { tcpEstablishedTimeout: 3600, tcpBeLiberal: true }, oomScoreAdj: undefined });
    expect(resolve(['--metrics-port=0', '--healthz-port=10266']).ops).toMatchObject({ metricsBindAddress: null, healthzBindAddress: '0.0.0.0:10266' });
  });

  test('bad values are usage errors naming the flag, or the file and the field', () => {
    expect(() => resolve(['kube', '--metrics-bind-address', 'localhost'])).toThrow(/--metrics-bind-address: "localhost" is not IP:PORT/);
    expect(() => resolve(['kube', '--oom-score-adj', '-5000'])).toThrow(/--oom-score-adj: -5000 must be in \[-1000, 1000\]/);
    expect(() => resolve(['kube', '--conntrack-udp-timeout', 'a while'])).toThrow(/invalid argument "a while" for "--conntrack-udp-timeout" flag: expected a duration/);
    expect(() => resolve(['kube', '--config', '/nope.yaml'])).toThrow(/--config \/nope.yaml: cannot read: ENOENT/);
    expect(() => resolve(['--proxy-mode', 'kernelspace'])).toThrow(/Windows only/);
    expect(() => resolve(['--proxy-mode', 'userspace'])).toThrow(UsageError);
    expect(() => resolve(['--logging-format=xml'])).toThrow(/--logging-format: "xml": expected text or json/);
    expect(() => resolve(['--master=not a url'])).toThrow(/--master "not a url": not a URL/);
    files['/bad.yaml'] = kubeadm.replace('metricsBindAddress: ""', 'metricsBindAddress: "nowhere"');
    expect(() => resolve(['--config', '/bad.yaml'])).toThrow(/--config \/bad.yaml: metricsBindAddress: "nowhere" is not IP:PORT/);
    expect(backendForMode('ipvs', registered)).toEqual({ backend: 'ipvs' });
  });
});

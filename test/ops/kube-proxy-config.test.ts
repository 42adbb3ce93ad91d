// Reading a kubeadm cluster's kube-proxy configuration, and kube-proxy's flags on kpng's command line.
import fs from 'node:fs';
import path from 'node:path';
import { parseKubeProxyConfiguration, isUnset } from '../../src/config/kube-proxy-config';
import { parseGoDuration } from '../../src/config/duration';
import { resolveKubeProxyArgs, backendForMode } from '../../src/cli/kube-proxy-flags';
import { parseCli, UsageError } from '../../src/cli/args';
import { registerBuiltinBackends } from '../../src/backend/builtin';

const FIXTURE = path.join(__dirname, 'fixtures', 'kubeadm-kube-proxy.yaml');
const kubeadm = fs.readFileSync(FIXTURE, 'utf8');
beforeAll(() => registerBuiltinBackends());
const registered = ['routes', 'dump', 'trace', 'nft'];

test('Go durations', () => {
  expect(parseGoDuration('30s')).toBe(30000);
  expect(parseGoDuration('1m30s')).toBe(90000);
  expect(parseGoDuration('2h22m')).toBe((2 * 60 + 22) * 60000);
  expect(parseGoDuration('250ms')).toBe(250);
  expect(parseGoDuration('0s')).toBe(0);
  expect(parseGoDuration('24h0m0s')).toBe(86400000);
  expect(parseGoDuration('1.5h')).toBe(5400000);
  expect(parseGoDuration('10')).toBeNull();
  expect(parseGoDuration('-1s')).toBeNull();
});

test('kubeadm\'s kube-proxy ConfigMap: the fields kpng honours, kube-proxy\'s defaults, nothing reported for zeros', () => {
  const c = parseKubeProxyConfiguration(kubeadm, 'kube-proxy ConfigMap');
  expect(c.mode).toBe('');
  expect(c.clusterCIDRs).toEqual(['10.244.0.0/16']);
  expect(c.kubeconfig).toBe('/var/lib/kube-proxy/kubeconfig.conf');
  expect(c.syncPeriodMs).toBeUndefined();
  expect(c.minSyncPeriodMs).toBeUndefined();
  expect(c.metricsBindAddress).toBeUndefined();
  expect(c.healthzBindAddress).toBeUndefined();
  expect(c.oomScoreAdj).toBe(-999);
  expect(c.conntrack).toEqual({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86400, tcpCloseWaitTimeout: 3600, tcpBeLiberal: false, udpTimeout: undefined, udpStreamTimeout: undefined });
  expect(c.ignored).toEqual([]);
});

test('set fields: the chosen mode\'s section is read, unsupported ones are named, bad types are errors', () => {
  const doc = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: " Node-7 "
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
metricsBindAddress: 0.0.0.0:10249
healthzBindAddress: "[::]:10256"
bindAddressHardFail: true
nodePortAddresses: [primary]
featureGates: {SomeGate: true}
enableProfiling: true
detectLocalMode: InterfaceNamePrefix
detectLocal: {interfaceNamePrefix: veth}
nftables: {masqueradeAll: true, syncPeriod: 45s, minSyncPeriod: 250ms, masqueradeBit: 14}
iptables: {masqueradeAll: false, syncPeriod: 5m, localhostNodePorts: true}
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 2h, tcpCloseWaitTimeout: 0s, tcpBeLiberal: true, udpTimeout: 30s}
logging: {verbosity: 4, format: json}
extraThing: 1
`;
  const c = parseKubeProxyConfiguration(doc, 'f');
  expect(c).toMatchObject({
    mode: 'nftables', hostnameOverride: 'node-7', clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'], masqueradeAll: true,
    syncPeriodMs: 45000, minSyncPeriodMs: 250, metricsBindAddress: '0.0.0.0:10249', healthzBindAddress: '[::]:10256',
    bindAddressHardFail: true, nodePortAddresses: ['primary'], verbosity: 4,
    conntrack: { maxPerCore: 0, tcpEstablishedTimeout: 7200, tcpCloseWaitTimeout: undefined, tcpBeLiberal: true, udpTimeout: 30 },
  });
  // iptables.* is another mode's section: not read, not reported.
  expect(c.ignored).toEqual([
    'extraThing (unknown field)', 'featureGates.SomeGate', 'logging.format (kpng logs text)', 'enableProfiling',
    'detectLocalMode (InterfaceNamePrefix: kpng tells pods by clusterCIDR)', 'detectLocal', 'nftables.masqueradeBit (kpng uses its own mark)',
  ]);
  expect(() => parseKubeProxyConfiguration(doc.replace('syncPeriod: 45s', 'syncPeriod: soon'), 'f')).toThrow(/nftables.syncPeriod: "soon" is not a duration/);
  expect(() => parseKubeProxyConfiguration(doc.replace('bindAddressHardFail: true', 'bindAddressHardFail: yes please'), 'f')).toThrow(/bindAddressHardFail: expected true or false/);
  expect(() => parseKubeProxyConfiguration('apiVersion: v1\nkind: Pod\n', 'f')).toThrow(/no KubeProxyConfiguration found/);
  expect(() => parseKubeProxyConfiguration(doc.replace('v1alpha1', 'v9'), 'f')).toThrow(/apiVersion "kubeproxy.config.k8s.io\/v9" is not supported/);
  expect(() => parseKubeProxyConfiguration('{{{', 'f')).toThrow(/not YAML or JSON/);
});

test('a whole ConfigMap is accepted (its config.conf)', () => {
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kube-proxy', namespace: 'kube-system' }, data: { 'config.conf': kubeadm, 'kubeconfig.conf': 'x' } };
  expect(parseKubeProxyConfiguration(JSON.stringify(cm), 'cm').clusterCIDRs).toEqual(['10.244.0.0/16']);
  expect(isUnset({ a: 0, b: { c: '', d: null, e: '0s' }, f: [] })).toBe(true);
});

test('kube-proxy\'s command line becomes kpng kube; flags win over the file', () => {
  const files: Record<string, string> = { '/c.yaml': kubeadm.replace('hostnameOverride: ""', 'hostnameOverride: from-file').replace('mode: ""', 'mode: nftables') };
  const readFile = (f: string) => { if (!(f in files)) throw Object.assign(new Error('nope'), { code: 'ENOENT' }); return files[f]; };
  const r = resolveKubeProxyArgs(['--config=/c.yaml', '--hostname-override=$(NODE_NAME)', '--cluster-cidr', '10.0.0.0/8', '--v=2'], { registered, readFile });
  expect(r.argv[0]).toBe('kube');
  const opts = parseCli(r.argv);
  expect(opts.command).toBe('kube');
  expect(opts.node).toBe('$(NODE_NAME)');
  expect(opts.model.clusterCIDRs).toEqual(['10.0.0.0/8']);
  expect(opts.to).toBe('nft');
  expect(opts.backendFlags['nft-table']).toBe('kpng');
  expect(opts.logLevel).toBe('info');
  expect(r.ops).toMatchObject({ metricsBindAddress: '127.0.0.1:10249', healthzBindAddress: '0.0.0.0:10256', bindAddressHardFail: false, oomScoreAdj: -999, configFile: '/c.yaml' });
  expect(r.ops.conntrack?.tcpEstablishedTimeout).toBe(86400);
  expect(opts.kubeContentType).toBe('protobuf'); // kubeadm's contentType "" is kube-proxy's default

  // clientConnection.contentType picks the kube source's encoding; --kube-api-content-type wins over it.
  files['/j.yaml'] = kubeadm.replace('contentType: ""', 'contentType: application/json');
  expect(parseKubeProxyConfiguration(files['/j.yaml'], 'j').ignored).toEqual([]);
  expect(parseCli(resolveKubeProxyArgs(['--config', '/j.yaml'], { registered, readFile }).argv).kubeContentType).toBe('json');
  expect(parseCli(resolveKubeProxyArgs(['--config', '/j.yaml', '--kube-api-content-type', 'application/vnd.kubernetes.protobuf'], { registered, readFile }).argv).kubeContentType).toBe('protobuf');
  expect(() => parseKubeProxyConfiguration(kubeadm.replace('contentType: ""', 'contentType: application/yaml'), 'y')).toThrow(/clientConnection.contentType: "application\/yaml" is not application\/vnd.kubernetes.protobuf or application\/json/);
  expect(() => parseCli(['kube', '--kube-api-content-type', 'application/yaml'])).toThrow(/--kube-api-content-type "application\/yaml": expected application\/vnd.kubernetes.protobuf or application\/json/);

  const f = resolveKubeProxyArgs(['file', '--input', 'x.yaml', '--metrics-bind-address', '', '--healthz-bind-address=127.0.0.1:0', '--conntrack-tcp-timeout-established', '1h', '--conntrack-tcp-be-liberal', '--proxy-mode', 'iptables', '--to', 'routes'], { registered });
  expect(f.argv).toEqual(['file', '--input', 'x.yaml', '--to', 'routes']);
  expect(f.ops).toMatchObject({ metricsBindAddress: null, healthzBindAddress: '127.0.0.1:0', conntrack: { tcpEstablishedTimeout: 3600, tcpBeLiberal: true }, oomScoreAdj: undefined });
  expect(resolveKubeProxyArgs(['file', '--input', 'x', '--proxy-mode', 'iptables'], { registered }).warnings).toEqual([expect.stringMatching(/kpng has no iptables mode; using nft/)]);
  expect(resolveKubeProxyArgs(['--help'], { registered, invokedAs: '/usr/local/bin/kube-proxy' }).argv).toEqual(['--help']);
  expect(resolveKubeProxyArgs(['--v', '4'], { registered, invokedAs: '/usr/local/bin/kube-proxy' }).argv).toEqual(['kube', '--log-level', 'debug']);
});

test('bad kube-proxy flags are usage errors naming the flag', () => {
  expect(() => resolveKubeProxyArgs(['kube', '--metrics-bind-address', 'localhost'], { registered })).toThrow(/--metrics-bind-address: "localhost" is not IP:PORT/);
  expect(() => resolveKubeProxyArgs(['kube', '--oom-score-adj', '-5000'], { registered })).toThrow(/--oom-score-adj "-5000"/);
  expect(() => resolveKubeProxyArgs(['kube', '--conntrack-udp-timeout', 'a while'], { registered })).toThrow(/--conntrack-udp-timeout "a while": expected a duration/);
  expect(() => resolveKubeProxyArgs(['kube', '--config', '/nope.yaml'], { registered })).toThrow(/--config \/nope.yaml: cannot read: ENOENT/);
  expect(() => resolveKubeProxyArgs(['kube', '--proxy-mode', 'kernelspace'], { registered })).toThrow(UsageError);
  expect(backendForMode('ipvs', [...registered, 'ipvs'])).toEqual({ backend: 'ipvs' });
});

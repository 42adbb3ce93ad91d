// kpng as a drop-in for kube-proxy, judged against upstream's own binary (v1.37, built from Go modules by
// hack/kube-proxy/build.sh): every flag of its --help is known to kpng; both write the same configuration
// for the same flags; every flag with a realistic value, and kubeadm's DaemonSet command line with its
// ConfigMap unchanged, start kpng against a real kube-apiserver and program nftables in a network
// namespace.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { Lab } from '../../bench/vs-upstream/lab';
import { buildKubeProxy } from '../../bench/vs-upstream/proxies';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../shared/objects';
import { KUBE_PROXY_FLAGS } from '../../src/cli/kube-proxy-flag-table';
import { KPNG, ROOT } from '../helpers/cli';
import { waitFor } from '../helpers/wait';
import { startControlPlane, type ControlPlane } from './support/controlplane';


let upstream: string;
let dir: string;
beforeAll(() => {
  upstream = buildKubeProxy();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-dropin-'));
}, 600_000);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const kpng = (args: string[]) => spawnSync(process.execPath, [KPNG, ...args], { encoding: 'utf8', timeout: 30_000 });

/** The long flag names of a `--help` text (pflag's layout: "  -v, --v Level   text"). */
function helpFlags(text: string): string[] {
  return [...text.matchAll(/^\s+(?:-\w, )?--([a-z0-9-]+)/gm)].map((m) => m[1]).sort();
}

test('every flag of upstream kube-proxy\'s --help is one kpng knows', () => {
  const up = helpFlags(spawnSync(upstream, ['--help'], { encoding: 'utf8' }).stdout);
  expect(up.length).toBeGreaterThan(50);
  const known = new Set(KUBE_PROXY_FLAGS.map((f) => f.name));
  expect(up.filter((f) => !known.has(f))).toEqual([]);
  // And nothing in kpng's table that upstream does not have (but its two deprecated, hidden port flags,
  // and the two JSON logging flags its help lists only with the LoggingAlphaOptions gate).
  expect(KUBE_PROXY_FLAGS.map((f) => f.name).filter((f) => !up.includes(f)).sort()).toEqual(['healthz-port', 'log-json-info-buffer-size', 'log-json-split-stream', 'metrics-port']);
});

test('--write-config-to: kpng writes what upstream writes, for the defaults and for the same flags', () => {
  const flagSets = [
    [],
    ['--proxy-mode=nftables', '--cluster-cidr=10.244.0.0/16,fd00:10:244::/56', '--iptables-sync-period=45s', '--iptables-min-sync-period=2s', '--masquerade-all',
      '--kube-api-qps=20', '--kube-api-burst=40', '--hostname-override=Node-1', '--nodeport-addresses=primary,10.0.0.0/8', '--conntrack-max-per-core=0',
      '--conntrack-tcp-timeout-established=2h', '--oom-score-adj=-500', '--metrics-bind-address=0.0.0.0:10249', '--detect-local-mode=InterfaceNamePrefix',
      '--pod-interface-name-prefix=veth', '--feature-gates=AllAlpha=false', '-v=3'],
    ['--proxy-mode=ipvs', '--ipvs-sync-period=20s', '--ipvs-scheduler=lc', '--ipvs-strict-arp', '--ipvs-exclude-cidrs=10.1.0.0/16', '--ipvs-tcp-timeout=5m', '--bind-address=fd00::1'],
  ];
  // (Upstream's binary has only the text log format: --logging-format=json is kpng's alone.)
  for (const [i, flags] of flagSets.entries()) {
    const [mine, theirs] = [path.join(dir, `kpng-${i}.yaml`), path.join(dir, `upstream-${i}.yaml`)];
    const k = kpng([...flags, `--write-config-to=${mine}`]);
    expect({ status: k.status, stderr: k.stderr }).toEqual({ status: 0, stderr: expect.stringContaining(`wrote the configuration to ${mine}`) });
    const u = spawnSync(upstream, [...flags, `--write-config-to=${theirs}`], { encoding: 'utf8' });
    expect(u.status).toBe(0);
    expect(parseYaml(fs.readFileSync(mine, 'utf8'))).toEqual(parseYaml(fs.readFileSync(theirs, 'utf8')));
  }
});

describe('against a real API server, in a network namespace', () => {
  let cp: ControlPlane;
  let lab: Lab | undefined;
  let clusterIP: string;
  const port = () => Number(new URL(cp.server).port);

  beforeAll(async () => {
    cp = await startControlPlane({ log: () => {} });
    const ok = async (p: Promise<{ status: number; text: string; body?: any }>) => { const r = await p; if (r.status >= 300) throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`); return r.body; };
    await ok(cp.request('POST', NODES, newNode('n1', 'zone-a')));
    await ok(cp.request('PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.1.1'], new Date())));
    clusterIP = (await ok(cp.request('POST', SERVICES('default'), newService('web')))).spec.clusterIP;
    await ok(cp.request('POST', SLICES('default'), newEndpointSlice('web-abc', 'web', [{ ip: '10.244.1.5' }])));
  }, 180_000);
  afterEach(async () => { await lab?.stop(); lab = undefined; });
  afterAll(async () => cp?.stop(), 60_000);

  const nftHas = (ip: string) => () => spawnSync('ip', ['netns', 'exec', lab!.netns, 'nft', 'list', 'table', 'ip', 'kpng'], { encoding: 'utf8' }).stdout.includes(ip);
  const stderr = () => lab!.stderrTail.join('\n');

  test('every upstream flag with a realistic value: kpng starts, programs nftables, and names the ones with no effect in one warning', async () => {
    lab = await Lab.create('kdi-all', port());
    // One realistic value per flag, as DaemonSets and operators give them (the action flags --cleanup,
    // --init-only, --write-config-to, --version, --help and --config have their own tests).
    const values: Record<string, string> = {
      'bind-address': '0.0.0.0', 'bind-address-hard-fail': 'false', 'cluster-cidr': '10.244.0.0/16', 'config-sync-period': '15m0s',
      'conntrack-max-per-core': '0', 'conntrack-min': '131072', 'conntrack-tcp-be-liberal': 'false', 'conntrack-tcp-timeout-close-wait': '1h0m0s',
      'conntrack-tcp-timeout-established': '24h0m0s', 'conntrack-udp-timeout': '0s', 'conntrack-udp-timeout-stream': '0s', 'detect-local-mode': 'ClusterCIDR',
      'feature-gates': 'AllAlpha=false', 'healthz-bind-address': '127.0.0.1:10256', 'hostname-override': 'n1', 'iptables-localhost-nodeports': 'true',
      'iptables-masquerade-bit': '14', 'iptables-min-sync-period': '1s', 'iptables-sync-period': '30s', 'ipvs-exclude-cidrs': '10.0.0.0/24',
      'ipvs-min-sync-period': '0s', 'ipvs-scheduler': 'rr', 'ipvs-strict-arp': 'false', 'ipvs-sync-period': '30s', 'ipvs-tcp-timeout': '0s',
      'ipvs-tcpfin-timeout': '0s', 'ipvs-udp-timeout': '0s', 'kube-api-burst': '10', 'kube-api-content-type': 'application/vnd.kubernetes.protobuf',
      'kube-api-qps': '5', kubeconfig: cp.kubeconfigPath, 'log-flush-frequency': '5s', 'log-text-info-buffer-size': '0', 'log-text-split-stream': 'false',
      'logging-format': 'text', 'masquerade-all': 'false', master: cp.server, 'metrics-bind-address': '127.0.0.1:10249', 'nodeport-addresses': 'primary',
      'oom-score-adj': '-999', 'pod-bridge-interface': 'cbr0', 'pod-interface-name-prefix': 'veth', profiling: 'false', 'proxy-mode': 'nftables',
      'show-hidden-metrics-for-version': '1.36', v: '2', vmodule: 'proxier*=4', 'healthz-port': '10256', 'metrics-port': '10249',
      // Not in upstream's --help (alpha-gated there), accepted by it at these, its defaults.
      'log-json-split-stream': 'false', 'log-json-info-buffer-size': '0',
    };
    const actions = ['cleanup', 'init-only', 'write-config-to', 'version', 'help', 'config'];
    expect(KUBE_PROXY_FLAGS.map((f) => f.name).filter((f) => !(f in values) && !actions.includes(f))).toEqual([]);
    lab.startProxy([process.execPath, KPNG, ...Object.entries(values).map(([k, v]) => `--${k}=${v}`)]);
    await waitFor('the service in kpng\'s table', nftHas(clusterIP), 30_000);
    expect(lab.proxyRunning).toBe(true);
    const warnings = lab.stderrTail.filter((l) => /no effect in kpng/.test(l));
    expect(warnings).toHaveLength(1);
    for (const f of ['config-sync-period', 'feature-gates AllAlpha', 'iptables-localhost-nodeports', 'iptables-masquerade-bit', 'ipvs-exclude-cidrs', 'ipvs-min-sync-period',
      'ipvs-scheduler', 'ipvs-strict-arp', 'ipvs-sync-period', 'ipvs-tcp-timeout', 'ipvs-tcpfin-timeout', 'ipvs-udp-timeout', 'log-flush-frequency',
      'log-text-info-buffer-size', 'log-text-split-stream', 'profiling', 'show-hidden-metrics-for-version']) expect(warnings[0]).toContain(`--${f} (`);
    // The flags kpng applies are not in it.
    for (const f of ['cluster-cidr', 'kube-api-qps', 'master', 'nodeport-addresses', 'conntrack-min', 'proxy-mode', 'pod-bridge-interface', 'vmodule']) expect(warnings[0]).not.toContain(`--${f} (`);
    expect(stderr()).toMatch(/server from --master/);
    expect(stderr()).toMatch(/5 requests\/s, bursts of 10/);
  }, 120_000);

  test('kubeadm\'s DaemonSet command line and its ConfigMap, unchanged but for where the files are: nftables programmed', async () => {
    lab = await Lab.create('kdi-kubeadm', port());
    const confDir = path.join(dir, 'var-lib-kube-proxy');
    fs.mkdirSync(confDir, { recursive: true });
    fs.copyFileSync(cp.kubeconfigPath, path.join(confDir, 'kubeconfig.conf'));
    const conf = fs.readFileSync(path.join(ROOT, 'test/ops/fixtures/kubeadm-kube-proxy.yaml'), 'utf8').replace('/var/lib/kube-proxy/', `${confDir}/`);
    fs.writeFileSync(path.join(confDir, 'config.conf'), conf);
    // kubeadm's container: command [/usr/local/bin/kube-proxy, --config=/var/lib/kube-proxy/config.conf, --hostname-override=$(NODE_NAME)].
    lab.startProxy([process.execPath, KPNG, `--config=${confDir}/config.conf`, '--hostname-override=n1']);
    await waitFor('the service in kpng\'s table', nftHas(clusterIP), 30_000);
    expect(stderr()).toMatch(/proxy mode not set .* runs its nftables backend \(nft\) and serves node ports as iptables mode does/);
    expect(stderr()).not.toMatch(/no effect in kpng|unknown field/);
  }, 120_000);
});

// The pieces behind the metrics and the health-check ports, on hand-made ENLS and objects (the real
// servers are tested in ops-servers.test.ts and e2e/ops-*.test.ts).
import { cluster, ep, node, slice, svc } from '../helpers/k8s';
import { noLocalEndpoints } from '../../src/metrics/no-local-endpoints';
import { ProgrammingLatency, TRIGGER_TIME_ANNOTATION } from '../../src/metrics/programming-latency';
import { healthCheckBody, healthCheckOf, listenAddresses } from '../../src/health/service-health';
import { applyConntrack, conntrackMax } from '../../src/config/conntrack';
import { FakeSysctl } from '../../src/config/fake';
import { nodeEligible } from '../../src/health/node-eligibility';
import { silentLogger } from '../../src/util/log';
import type { Service } from '../../src/model/enls';

const lbLocal = (name: string, hcnp = 31000) => svc(name, { type: 'LoadBalancer', etp: 'Local', lbIPs: ['203.0.113.5'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http', nodePort: 30080 }], extraSpec: { healthCheckNodePort: hcnp } });

function service(objects: Record<string, unknown>[], name: string): Service {
  const c = cluster('n1', [node('n1'), ...objects]);
  return c.state.get(`svc/default/${name}`)!.service!;
}

test('health check of an externalTrafficPolicy Local service: distinct local ready endpoint IPs', () => {
  const s = service([lbLocal('lb'), slice('lb-1', 'lb', [ep('10.0.0.1', { node: 'n1', ready: true }), ep('10.0.0.2', { node: 'n2', ready: true }), ep('10.0.0.3', { node: 'n1', ready: true })])], 'lb');
  const t = healthCheckOf(s)!;
  expect(t).toEqual({ namespace: 'default', name: 'lb', port: 31000, localEndpoints: 2 });
  expect(healthCheckBody(t, true)).toBe('{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "lb"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}');
  const none = service([lbLocal('lb'), slice('lb-1', 'lb', [ep('10.0.0.2', { node: 'n2', ready: true })])], 'lb');
  expect(healthCheckOf(none)!.localEndpoints).toBe(0);
  expect(noLocalEndpoints(none)).toEqual({ 'IPv4/external': 1 });
  expect(healthCheckOf(service([svc('plain'), slice('p-1', 'plain', [ep('10.0.0.1', { node: 'n1' })])], 'plain'))).toBeNull();
});

test('no_local_endpoints counts internal and external Local policies separately', () => {
  const s = service([svc('itp', { itp: 'Local' }), slice('i-1', 'itp', [ep('10.0.0.2', { node: 'n2' })])], 'itp');
  expect(noLocalEndpoints(s)).toEqual({ 'IPv4/internal': 1 });
  const ok = service([svc('itp', { itp: 'Local' }), slice('i-1', 'itp', [ep('10.0.0.1', { node: 'n1' })])], 'itp');
  expect(noLocalEndpoints(ok)).toEqual({});
});

test('listen addresses of health-check ports follow the node-port addresses', () => {
  const n = (v4: string[], v6: string[] = []) => ({ name: 'n1', zone: '', addresses: [], podBridgeInterface: '', podInterfaceNamePrefix: '', podCidrs: { v4: [], v6: [] }, nodePortAddresses: { v4, v6 } });
  const ifs = { eth0: [{ address: '192.168.50.1', family: 'IPv4' }, { address: '10.1.2.3', family: 'IPv4' }], lo: [{ address: '127.0.0.1', family: 'IPv4' }, { address: '::1', family: 'IPv6' }] } as never;
  expect(listenAddresses(n(['192.168.50.1/32']), ifs)).toEqual([{ host: '192.168.50.1', ipv6Only: false }]);
  expect(listenAddresses(n(['0.0.0.0/0'], ['::/0']), ifs)).toEqual([{ host: '0.0.0.0', ipv6Only: false }, { host: '::', ipv6Only: true }]);
  expect(listenAddresses(n(['10.0.0.0/8']), ifs)).toEqual([{ host: '10.1.2.3', ipv6Only: false }]);
  expect(listenAddresses(undefined, ifs)).toEqual([]);
  const v4only = { eth0: [{ address: '192.168.50.1', family: 'IPv4' }] } as never;
  expect(listenAddresses(n(['0.0.0.0/0'], ['::/0']), v4only)).toEqual([{ host: '0.0.0.0', ipv6Only: false }]);
});

test('network programming latency: trigger times after start, only for changes that reach the state', () => {
  const c = cluster('n1', [node('n1'), svc('web')]);
  const start = Date.now();
  const lat = new ProgrammingLatency(c.state, start);
  const triggered = (at: number, name = 'web-1', ip = '10.0.0.2') => {
    const s = slice(name, 'web', [ep(ip, { node: 'n1', ready: true })]) as { metadata: { annotations?: Record<string, string> } };
    s.metadata.annotations = { [TRIGGER_TIME_ANNOTATION]: new Date(at).toISOString() };
    return s;
  };
  const apply = (raw: Record<string, unknown>) => {
    lat.onSlice(raw, false);
    c.store.apply('EndpointSlice', raw);
    const before = c.state.revision;
    const listener = c.store.onChange((ch) => lat.onFlush(ch.services, false));
    c.store.flush();
    listener();
    return c.state.revision > before;
  };
  expect(apply(triggered(start - 60000, 'old', '10.0.0.1'))).toBe(true); // from before start: not measured
  expect(apply(triggered(start + 10))).toBe(true);
  expect(apply(triggered(start + 10))).toBe(false); // same trigger, no change
  const rev = c.state.revision;
  const got = lat.onApplied(rev, start + 510);
  expect(got).toEqual([{ seconds: 0.5, family: 'IPv4' }]);
  expect(lat.onApplied(rev, start + 900)).toEqual([]);
});

test('node eligibility: deletion timestamp or the autoscaler taint', () => {
  expect(nodeEligible(node('n1'))).toBe(true);
  expect(nodeEligible({ metadata: { name: 'n1', deletionTimestamp: '2024-01-01T00:00:00Z' } })).toBe(false);
  expect(nodeEligible({ metadata: { name: 'n1' }, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } })).toBe(false);
  expect(nodeEligible({ metadata: { name: 'n1' }, spec: { taints: 'garbage' } })).toBe(true);
});

test('conntrack settings as kube-proxy applies them: max only raised, hashsize a quarter, timeouts when different', () => {
  const files = new Map<string, number>([
    ['/proc/sys/net/netfilter/nf_conntrack_max', 65536], ['/sys/module/nf_conntrack/parameters/hashsize', 16384],
    ['/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established', 432000], ['/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait', 3600],
  ]);
  const io = new FakeSysctl(files);
  expect(conntrackMax({ maxPerCore: 32768, min: 131072 }, 2)).toBe(131072);
  expect(conntrackMax({ maxPerCore: 32768, min: 0 }, 64)).toBe(1048576);
  expect(conntrackMax({ maxPerCore: 0, min: 131072 }, 2)).toBe(0);
  const done = applyConntrack({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeout: 86400, tcpCloseWaitTimeout: 3600, tcpBeLiberal: true }, silentLogger, io, 2);
  expect(done).toEqual([
    '/proc/sys/net/netfilter/nf_conntrack_max=131072', '/sys/module/nf_conntrack/parameters/hashsize=32768',
    '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established=86400', '/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal=1',
  ]);
  files.set('/proc/sys/net/netfilter/nf_conntrack_max', 262144);
  expect(applyConntrack({ maxPerCore: 32768, min: 131072 }, silentLogger, io, 2)).toEqual([]); // never lowered
});

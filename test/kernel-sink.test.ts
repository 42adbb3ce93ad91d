// The shared kernel-backend layer with a recording Dataplane: when it does full and incremental
// syncs, how it recovers, and the stale UDP conntrack filters it computes from the ENLS.
import type { Dataplane, ServiceChange, SyncReport } from '../src/backend/kernel/dataplane';
import { KernelSink } from '../src/backend/kernel/kernel-sink';
import { addFullSyncUdpFilters, staleUdpFilters } from '../src/backend/kernel/conntrack';
import type { ConntrackFilter } from '../src/native/nft-types';
import type { NodeInfo, Service } from '../src/model/enls';
import type { Batch } from '../src/sink/sink';
import { runSink } from '../src/runner';
import { silentLogger } from '../src/util/log';
import { cluster, ep, node, slice, svc } from './helpers/k8s';

class Recorder implements Dataplane {
  readonly name = 'rec';
  calls: Array<{ kind: 'full' | 'update'; keys: string[]; node?: string }> = [];
  fail = false;
  async fullSync(services: Service[], n: NodeInfo | undefined): Promise<SyncReport> {
    if (this.fail) throw new Error('EPERM');
    this.calls.push({ kind: 'full', keys: services.map((s) => `${s.namespace}/${s.name}`), node: n?.name });
    return { messages: 1, bytes: 1, ms: 0 };
  }
  async update(changes: ServiceChange[]): Promise<SyncReport> {
    if (this.fail) throw new Error('EPERM');
    this.calls.push({ kind: 'update', keys: changes.map((c) => `${c.key}:${c.old ? 'old' : '-'}>${c.new ? 'new' : '-'}`) });
    return { messages: 1, bytes: 1, ms: 0 };
  }
}

const udp = (pods: string[]) => [
  svc('dns', { ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] }),
  slice('dns-1', 'dns', pods.map((ip) => ep(ip, { node: 'n2' })), { ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }] }),
];

test('full sync first, then only the changed services with their old and new ENLS; a node change is a full sync', async () => {
  const c = cluster('n1', [node('n1'), ...udp(['10.244.2.1'])]);
  const dp = new Recorder();
  const deleted: ConntrackFilter[][] = [];
  const sink = new KernelSink(dp, { log: () => {}, conntrackDelete: async (f) => { deleted.push(f); return f.length; } });
  const sub = c.state.subscribe();
  const next = async (): Promise<Batch> => { await sub.ready(); return sub.take(); };
  await sink.apply(await next(), c.state);
  expect(dp.calls).toEqual([{ kind: 'full', keys: ['default/dns'], node: 'n1' }]);
  // After a full sync: entries to the service not from its endpoints go (restart / failure recovery).
  expect(deleted[0]).toContainEqual({ family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53, keepReplySrc: ['10.244.2.1'] });

  c.add(...udp(['10.244.2.2']));
  await sink.apply(await next(), c.state);
  expect(dp.calls[1]).toEqual({ kind: 'update', keys: ['svc/default/dns:old>new'] });
  expect(deleted[1]).toEqual([{ family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53, replySrc: '10.244.2.1', replySport: 5353 }]);

  c.add(node('n1', 'zone-b'));
  await sink.apply(await next(), c.state);
  expect(dp.calls[2].kind).toBe('full');
  expect(sink.stats).toMatchObject({ syncs: 3, fullSyncs: 2, failures: 0 });
  sub.close();
});

test('a full sync reads a large state with turns for the event loop in between, and hands it over after one', async () => {
  const items = Array.from({ length: 5000 }, (_, i) => ({ key: `svc/ns/s${String(i).padStart(5, '0')}`, service: { namespace: 'ns', name: `s${i}`, ports: [] } as unknown as Service }));
  let turns = 0, running = true;
  const tick = () => { turns++; if (running) setImmediate(tick); };
  setImmediate(tick);
  const seen: number[] = []; // turns taken when each 1000th item was read
  const state = {
    node: 'n1', revision: 1, size: items.length,
    get: () => undefined,
    *items() { for (let i = 0; i < items.length; i++) { if (i % 1000 === 0) seen.push(turns); yield items[i]!; } },
  };
  let turnsAtHandOver = -1;
  const dp = new Recorder();
  const full = dp.fullSync.bind(dp);
  dp.fullSync = async (s, n) => { turnsAtHandOver = turns; return full(s, n); };
  const sink = new KernelSink(dp, { log: () => {}, sliceMs: 0 });
  const turnsBefore = turns;
  await sink.apply({ revision: 1, reset: true, changes: [] }, state);
  running = false;
  expect(dp.calls[0]!.keys).toHaveLength(5000);
  // Every check is due with sliceMs 0: a turn every 1024 items, so the reads of items 0, 1000, ... 4000
  // saw the count grow; and one more turn before the dataplane's own work starts.
  expect(new Set(seen).size).toBeGreaterThanOrEqual(4);
  expect(turnsAtHandOver).toBeGreaterThan(seen[seen.length - 1]!);
  expect(seen[0]).toBe(turnsBefore);
});

test('a failed sync is counted and logged, keeps nothing as applied, and the next one is full', async () => {
  const c = cluster('n1', udp(['10.244.2.1']));
  const dp = new Recorder();
  const logs: string[] = [];
  const sink = new KernelSink(dp, { log: (m) => logs.push(m) });
  const sub = c.state.subscribe();
  await sub.ready();
  await sink.apply(sub.take(), c.state);
  dp.fail = true;
  c.add(...udp(['10.244.2.9']));
  await sub.ready();
  await expect(sink.apply(sub.take(), c.state)).rejects.toThrow('EPERM');
  expect(logs.join('\n')).toMatch(/rec: revision \d+: incremental \(1 services\) sync failed \(failure #1\), next sync is a full one: EPERM/);
  dp.fail = false;
  c.add(...udp(['10.244.2.10']));
  await sub.ready();
  await sink.apply(sub.take(), c.state);
  expect(dp.calls.map((x) => x.kind)).toEqual(['full', 'full']);
  expect(sink.stats).toMatchObject({ failures: 1, fullSyncs: 2 });
  sub.close();
});

test('conntrack clean-ups are done and reported per IP family (kube-proxy\'s reconciler metrics); a failed one deletes nothing', async () => {
  const dual = (v4: string, v6: string) => [
    svc('dns', { clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] }),
    slice('dns-4', 'dns', [ep(v4, { node: 'n2' })], { ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }] }),
    slice('dns-6', 'dns', [ep(v6, { node: 'n2' })], { ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }], family: 'IPv6' }),
  ];
  const c = cluster('n1', [node('n1'), ...dual('10.244.2.1', 'fd00:244::1')]);
  const calls: Array<Array<'ip' | 'ip6'>> = [];
  let failIp6 = false;
  const sink = new KernelSink(new Recorder(), {
    log: () => {},
    conntrackDelete: async (f) => {
      calls.push([...new Set(f.map((x) => x.family))]);
      if (failIp6 && f[0].family === 'ip6') throw new Error('EPERM');
      return f.length * 2;
    },
  });
  const sub = c.state.subscribe();
  const next = async (): Promise<Batch> => { await sub.ready(); return sub.take(); };
  await sink.apply(await next(), c.state);
  // One call per family, each with that family's filters only.
  expect(calls).toEqual([['ip'], ['ip6']]);
  expect(sink.stats.lastConntrack.map((x) => [x.family, x.deleted])).toEqual([['IPv4', 2], ['IPv6', 2]]);
  expect(sink.stats.lastConntrack.every((x) => x.seconds >= 0)).toBe(true);

  // Only the IPv6 endpoint goes: only IPv6 is cleaned; its failure is counted and reported as 0 deleted.
  failIp6 = true;
  c.add(...dual('10.244.2.1', 'fd00:244::2'));
  await sink.apply(await next(), c.state);
  expect(calls.slice(2)).toEqual([['ip6']]);
  expect(sink.stats.lastConntrack.map((x) => [x.family, x.deleted])).toEqual([['IPv6', 0]]);
  expect(sink.stats).toMatchObject({ conntrackFailures: 1, conntrackDeleted: 4 });

  // A batch with no UDP change reports no clean-up.
  c.add(svc('web'));
  await sink.apply(await next(), c.state);
  expect(sink.stats.lastConntrack).toEqual([]);
  sub.close();
});

test('the runner asks for a full resync every --sync-period (repairing state edited behind kpng\'s back)', async () => {
  const c = cluster('n1', udp(['10.244.2.1']));
  const dp = new Recorder();
  const sink = new KernelSink(dp, { log: () => {} });
  const ac = new AbortController();
  const done = runSink(c.state, sink, { log: silentLogger, minSyncPeriodMs: 0, burst: 1, fullSyncPeriodMs: 30 }, ac.signal);
  const deadline = Date.now() + 5000;
  while (dp.calls.filter((x) => x.kind === 'full').length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  ac.abort();
  await done;
  expect(dp.calls.filter((x) => x.kind === 'full').length).toBeGreaterThanOrEqual(3);
  expect(dp.calls.every((x) => x.kind === 'full')).toBe(true);
});

describe('stale UDP conntrack filters from ENLS changes', () => {
  const dnsItem = (pods: string[], extra: Record<string, unknown> = {}) =>
    cluster('n1', [svc('dns', { ports: [{ name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 }], type: 'NodePort', ...extra }),
      slice('dns-1', 'dns', pods.map((ip) => ep(ip, { node: 'n2' })), { ports: [{ name: 'dns', protocol: 'UDP', port: 5353 }] })]).state.get('svc/default/dns')!.service!;

  test('a removed endpoint: its entries to every service address and to the node port', () => {
    expect(staleUdpFilters(dnsItem(['10.244.2.1', '10.244.2.2']), dnsItem(['10.244.2.2']))).toEqual([
      { family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53, replySrc: '10.244.2.1', replySport: 5353 },
      { family: 'ip', proto: 'udp', dport: 30053, replySrc: '10.244.2.1', replySport: 5353 },
    ]);
  });
  test('a target port change: the same pod, its entries to the old port (upstream e2e: Conntrack, UDP service target port changes)', () => {
    const dnsOnPort = (port: number) => cluster('n1', [svc('dns', { ports: [{ name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 }], type: 'NodePort' }),
      slice('dns-1', 'dns', [ep('10.244.2.1', { node: 'n2' })], { ports: [{ name: 'dns', protocol: 'UDP', port }] })]).state.get('svc/default/dns')!.service!;
    expect(staleUdpFilters(dnsOnPort(8080), dnsOnPort(9090))).toEqual([
      { family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53, replySrc: '10.244.2.1', replySport: 8080 },
      { family: 'ip', proto: 'udp', dport: 30053, replySrc: '10.244.2.1', replySport: 8080 },
    ]);
  });
  test('a port that gains its first endpoint: entries of the refused flow', () => {
    expect(staleUdpFilters(dnsItem([]), dnsItem(['10.244.2.2']))).toEqual([
      { family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53 },
      { family: 'ip', proto: 'udp', dport: 30053 },
    ]);
  });
  test('nothing for an unchanged service; after a full sync, entries whose reply source is not an endpoint in use', () => {
    expect(staleUdpFilters(dnsItem(['10.244.2.1']), dnsItem(['10.244.2.1']))).toEqual([]);
    const filters: ConntrackFilter[] = [];
    addFullSyncUdpFilters(dnsItem(['10.244.2.1']), filters);
    expect(filters).toEqual([
      { family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53, keepReplySrc: ['10.244.2.1'] },
      { family: 'ip', proto: 'udp', dport: 30053, keepReplySrc: ['10.244.2.1'] },
    ]);
  });
});

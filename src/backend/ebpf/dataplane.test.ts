// The socket-LB dataplane without a kernel: what it asks of the maps, in which order, and how it
// recovers from a failed batch (the e2e test in test/e2e/ebpf.test.ts makes real connections).
import { EndpointList, IPFamily, Protocol, Target, normalizeItem, type Endpoint, type Route, type Service } from '../../model/enls';
import type { EbpfMapGroup } from '../../native/ebpf';
import { node as ebpfNode, variedServices } from '../../../test/helpers/ebpf-services';
import { EbpfDataplane } from './dataplane';
import { FakeEbpfMaps } from './fake';
import { BACKEND_MAP, decodeBackend, decodeSvcKey, decodeSvcValue } from './maps';

const r = (target: Target): Route => ({ target, masquerade: false });
const ep = (ip: string, local = true): Endpoint => ({ ip, port: 8080, local, terminating: false });

function svc(name: string, eps: Endpoint[], over: { target?: Target; affinity?: number; ip?: string; udp?: boolean } = {}): Service {
  const route = r(over.target ?? Target.CLUSTER);
  return normalizeItem({
    key: `svc/ns/${name}`,
    service: {
      namespace: 'ns', name, type: 'ClusterIP', clusterIps: { v4: [over.ip ?? '10.96.0.1'], v6: [] },
      sessionAffinity: over.affinity ? { timeoutSeconds: over.affinity } : null,
      ports: [{ port: { name: 'p', protocol: over.udp ? Protocol.UDP : Protocol.TCP, port: 80, nodePort: 0 }, family: IPFamily.IPV4, clusterEndpoints: eps, localEndpoints: eps.filter((e) => e.local), clusterIp: { pod: route, node: route, other: route } }],
    },
  }).service!;
}


const mk = (opts: { destroyTcp?: boolean } = { destroyTcp: true }) => {
  const fake = new FakeEbpfMaps();
  return { fake, dp: new EbpfDataplane(async () => fake, () => {}, undefined, opts) };
};
const order = (gs: EbpfMapGroup[]) => gs.map((g) => `${g.op} ${g.map === BACKEND_MAP ? 'be' : 'svc'}:${g.count}`);

test('full sync writes backends, then slots, then slot 0; no endpoints and REJECT/DROP refuse', async () => {
  const { fake, dp } = mk();
  await dp.fullSync([svc('a', [ep('10.244.1.10'), ep('10.244.1.11')]), svc('b', [], { ip: '10.96.0.2' }), svc('c', [ep('10.244.1.10')], { ip: '10.96.0.3', target: Target.DROP })], undefined, 1);
  expect(order(fake.groups[0])).toEqual(['update be:2', 'update svc:2', 'update svc:3']);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.10:8080,10.244.1.11:8080', '10.96.0.2:80': 'refuse', '10.96.0.3:80': 'refuse' });
});

test('an endpoint change touches only its service; removals go count first, then slots, then backends', async () => {
  const { fake, dp } = mk();
  const a = svc('a', [ep('10.244.1.10'), ep('10.244.1.11'), ep('10.244.1.12')]);
  await dp.fullSync([a, svc('b', [ep('10.244.1.12')], { ip: '10.96.0.2' })], undefined, 1);
  const a2 = svc('a', [ep('10.244.1.11')]);
  await dp.update([{ key: 'svc/ns/a', old: a, new: a2 }], undefined, 2);
  // slot 1 now names the remaining backend, then slot 0's count shrinks, then slots 2-3 and the old backends go.
  expect(order(fake.groups[1])).toEqual(['update svc:1', 'update svc:1', 'delete svc:2', 'delete be:2']);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.11:8080', '10.96.0.2:80': '10.244.1.12:8080' });
  await dp.update([{ key: 'svc/ns/a', old: a2, new: null }], undefined, 3);
  expect(order(fake.groups[2])).toEqual(['delete svc:1', 'delete svc:1', 'delete be:1']);
  expect(fake.resolve()).toEqual({ '10.96.0.2:80': '10.244.1.12:8080' });
  // Each removal destroys the sockets connected to the backends that left (TCP here, --ebpf-destroy-tcp).
  expect(fake.destroyCalls).toEqual([['10.96.0.1:80/tcp 10.244.1.10:8080', '10.96.0.1:80/tcp 10.244.1.12:8080'], ['10.96.0.1:80/tcp 10.244.1.11:8080']]);
  // Nothing changed: nothing written.
  const b = svc('b', [ep('10.244.1.12')], { ip: '10.96.0.2' });
  expect(await dp.update([{ key: 'svc/ns/b', old: b, new: b }], undefined, 4)).toEqual({ messages: 0, bytes: 0, ms: 0 });
});

test('an update keeps the ids of endpoints that stay, and a freed id is never given again', async () => {
  const { fake, dp } = mk();
  const idsByIp = () => new Map([...fake.be].map(([id, v]) => [decodeBackend(v).addr, id]));
  const a1 = svc('a', [ep('10.244.1.10'), ep('10.244.1.11')]);
  await dp.fullSync([a1, svc('b', [ep('10.244.1.10')], { ip: '10.96.0.2' })], undefined, 1);
  const before = [...fake.be.keys()];
  const first = new Map([...fake.be].filter(([id]) => id !== Math.max(...before)).map(([id, v]) => [decodeBackend(v).addr, id]));
  const a2 = svc('a', [ep('10.244.1.11'), ep('10.244.1.12')]);
  await dp.update([{ key: 'svc/ns/a', old: a1, new: a2 }], undefined, 2);
  const after = [...fake.be.keys()];
  expect(after).toHaveLength(3);   // a: .11 and .12; b: its own .10
  expect(idsByIp().get('10.244.1.11')).toBe(first.get('10.244.1.11'));
  expect(Math.max(...after)).toBeGreaterThan(Math.max(...before));
  // .10 comes back to a: a new id, not the one a's .10 had.
  await dp.update([{ key: 'svc/ns/a', old: a2, new: svc('a', [ep('10.244.1.10'), ep('10.244.1.11'), ep('10.244.1.12')]) }], undefined, 3);
  expect(new Set(fake.be.keys()).has(first.get('10.244.1.10')!)).toBe(false);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.10:8080,10.244.1.11:8080,10.244.1.12:8080', '10.96.0.2:80': '10.244.1.10:8080' });
  // A full sync of the same state rewrites nothing.
  const writes = fake.groups.length;
  await dp.fullSync([svc('a', [ep('10.244.1.10'), ep('10.244.1.11'), ep('10.244.1.12')]), svc('b', [ep('10.244.1.10')], { ip: '10.96.0.2' })], undefined, 4);
  expect(fake.groups.length).toBe(writes);
});

test('an endpoint both in a port\'s cluster list and in its local list is one backend', async () => {
  const { fake, dp } = mk();
  const local = ep('10.244.1.10'), remote = ep('10.244.2.10', false);
  const s = normalizeItem({
    key: 'svc/ns/np',
    service: {
      namespace: 'ns', name: 'np', type: 'NodePort', clusterIps: { v4: ['10.96.0.1'], v6: [] },
      ports: [{
        port: { name: 'p', protocol: Protocol.TCP, port: 80, nodePort: 30080 }, family: IPFamily.IPV4,
        clusterEndpoints: [local, remote], localEndpoints: [local],
        clusterIp: { pod: r(Target.CLUSTER), node: r(Target.CLUSTER), other: r(Target.CLUSTER) },
        nodePort: { pod: r(Target.LOCAL), node: r(Target.LOCAL), other: r(Target.LOCAL) },
      }],
    },
  }).service!;
  const node = { name: 'n1', zone: '', addresses: ['192.168.50.1'], podBridgeInterface: '', podInterfaceNamePrefix: '', podCidrs: { v4: [], v6: [] }, nodePortAddresses: { v4: ['0.0.0.0/0'], v6: [] } };
  await dp.fullSync([s], node, 1);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.10:8080,10.244.2.10:8080', '192.168.50.1:30080': '10.244.1.10:8080' });
  expect(fake.be.size).toBe(2);
  expect(dp.counts).toEqual({ services: 2, slots: 3, backends: 2 });
});

test('services that do not fit in the service map are left out (nft serves them) and added when room is made', async () => {
  const fake = new FakeEbpfMaps();
  const logs: string[] = [];
  const dp = new EbpfDataplane(async () => fake, (m) => logs.push(m), 10);
  const three = (n: number) => [ep(`10.244.${n}.1`), ep(`10.244.${n}.2`), ep(`10.244.${n}.3`)];
  const a = svc('a', three(1)), b = svc('b', three(2), { ip: '10.96.0.2' }), c = svc('c', three(3), { ip: '10.96.0.3' });
  // 4 entries each (slot 0 + 3 slots): a and b fit in 10, c does not.
  await dp.fullSync([a, b, c], undefined, 1);
  expect(Object.keys(fake.resolve()).sort()).toEqual(['10.96.0.1:80', '10.96.0.2:80']);
  expect(dp.overflowed).toBe(1);
  expect(logs.join('\n')).toMatch(/service map is full \(10 entries.*1 service that need 4 more entries are served by the nft part only.*--ebpf-map-entries 1024 /);
  // a grows past the room left: it leaves the maps too, rather than half of it being written.
  const a2 = svc('a', [...three(1), ep('10.244.1.4'), ep('10.244.1.5'), ep('10.244.1.6'), ep('10.244.1.7')]);
  await dp.update([{ key: 'svc/ns/a', old: a, new: a2 }], undefined, 2);
  // Its 4 entries freed room for c (which overflowed first); a2 (8 entries) still does not fit.
  expect(Object.keys(fake.resolve()).sort()).toEqual(['10.96.0.2:80', '10.96.0.3:80']);
  expect(dp.overflowed).toBe(1);
  // b goes: 4 + 8 entries would still not fit. b and c go: a2 fits.
  await dp.update([{ key: 'svc/ns/b', old: b, new: null }], undefined, 3);
  expect(Object.keys(fake.resolve())).toEqual(['10.96.0.3:80']);
  expect(dp.overflowed).toBe(1);
  await dp.update([{ key: 'svc/ns/c', old: c, new: null }], undefined, 4);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': a2.ports[0].clusterEndpoints.map((e) => `${e.ip}:8080`).sort().join(',') });
  expect(dp.overflowed).toBe(0);
  expect(fake.svc.size).toBeLessThanOrEqual(10);
});

test('a restarted dataplane takes over the pinned maps and their ids: it writes only what changed, removes what is stale', async () => {
  const { fake, dp } = mk();
  await dp.fullSync([svc('a', [ep('10.244.1.10')], { affinity: 60 }), svc('old', [ep('10.244.9.9')], { ip: '10.96.0.9' })], undefined, 1);
  const idOf = (ip: string) => [...fake.be].find(([, v]) => decodeBackend(v).addr === ip)?.[0];
  const headOf = () => [...fake.svc].map(([k, v]) => [decodeSvcKey(Buffer.from(k, 'hex')), decodeSvcValue(v)] as const).find(([k]) => k.slot === 0 && k.addr === '10.96.0.1')![1];
  const kept = idOf('10.244.1.10')!, svcId = headOf().svcId, top = Math.max(...fake.be.keys());
  // A new process over the same maps: the same state again writes nothing.
  const writes = fake.groups.length;
  await new EbpfDataplane(async () => fake, () => {}).fullSync([svc('a', [ep('10.244.1.10')], { affinity: 60 }), svc('old', [ep('10.244.9.9')], { ip: '10.96.0.9' })], undefined, 1);
  expect(fake.groups.length).toBe(writes);
  // Another one, after a service went and an endpoint came while nothing ran.
  const dp2 = new EbpfDataplane(async () => fake, () => {});
  await dp2.fullSync([svc('a', [ep('10.244.1.10'), ep('10.244.1.11')], { affinity: 60 })], undefined, 1);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.10:8080,10.244.1.11:8080' });
  // The new backend and slot, the count; then old's slot 0, its slot, its backend.
  expect(order(fake.groups[fake.groups.length - 1])).toEqual(['update be:1', 'update svc:1', 'update svc:1', 'delete svc:1', 'delete svc:1', 'delete be:1']);
  expect(idOf('10.244.1.10')).toBe(kept);
  expect(idOf('10.244.1.11')).toBeGreaterThan(top);   // never an id the maps had
  expect(headOf()).toMatchObject({ affinitySeconds: 60, svcId });
  // Its own next change keeps the ids it took over.
  await dp2.update([{ key: 'svc/ns/a', old: svc('a', [ep('10.244.1.10'), ep('10.244.1.11')], { affinity: 60 }), new: svc('a', [ep('10.244.1.10')], { affinity: 60 }) }], undefined, 2);
  expect(order(fake.groups[fake.groups.length - 1])).toEqual(['update svc:1', 'delete svc:1', 'delete be:1']);
  expect(idOf('10.244.1.10')).toBe(kept);
});

test('a sync whose new entries do not fit beside the ones they replace removes those first, taking the changed addresses off meanwhile', async () => {
  const eps = (n: number, from: number) => Array.from({ length: 4 }, (_, i) => ep(`10.244.${n}.${from + i}`));
  const svcs = (from: number) => [svc('a', eps(1, from)), svc('b', eps(2, from), { ip: '10.96.0.2' }), svc('c', [ep('10.244.3.1')], { ip: '10.96.0.3' })];
  const logs: string[] = [];
  // 5 + 5 + 2 service entries and 9 backends in maps of 14: every pod of a and b replaced needs 8 more backends.
  const fake = new FakeEbpfMaps();
  fake.capacity = 14;
  const mkDp = () => new EbpfDataplane(async () => fake, (m) => logs.push(m), 14);
  await mkDp().fullSync(svcs(10), undefined, 1);
  fake.refusedBetween.clear();
  // A restart after a rollout replaced every pod of a and b.
  const dp = mkDp();
  await dp.fullSync(svcs(20), undefined, 1);
  const want = (from: number) => ({ '10.96.0.1:80': eps(1, from).map((e) => `${e.ip}:8080`).join(','), '10.96.0.2:80': eps(2, from).map((e) => `${e.ip}:8080`).join(','), '10.96.0.3:80': '10.244.3.1:8080' });
  expect(fake.resolve()).toEqual(want(20));
  // Slot 0s of a and b off first, their slots and backends, then the new backends, slots, slot 0s.
  expect(order(fake.groups[fake.groups.length - 1])).toEqual(['delete svc:2', 'delete be:8', 'update be:8', 'update svc:8', 'update svc:2']);
  expect(logs.join('\n')).toMatch(/hold 12 service entries and 9 backends: this sync's 0 and 8 new ones do not fit .* the 2 service addresses it changes are served by the nft part/);
  // Never a slot 0 naming a missing slot or backend (connect() would refuse), and c never off.
  expect([...fake.refusedBetween]).toEqual([]);
  // The same through an update: a's pods replaced again, and c grown to 2 endpoints (1 more of each).
  fake.refusedBetween.clear();
  await dp.update([
    { key: 'svc/ns/a', old: svcs(20)[0]!, new: svc('a', eps(1, 30)) },
    { key: 'svc/ns/c', old: svcs(20)[2]!, new: svc('c', [ep('10.244.3.1'), ep('10.244.3.2')], { ip: '10.96.0.3' }) },
  ], undefined, 2);
  expect(fake.resolve()).toEqual({ ...want(20), '10.96.0.1:80': eps(1, 30).map((e) => `${e.ip}:8080`).join(','), '10.96.0.3:80': '10.244.3.1:8080,10.244.3.2:8080' });
  expect([...fake.refusedBetween]).toEqual([]);
  // With room to spare the safe order stays: writes first.
  const roomy = new FakeEbpfMaps();
  const dp2 = new EbpfDataplane(async () => roomy, () => {}, 64);
  await dp2.fullSync(svcs(10), undefined, 1);
  await new EbpfDataplane(async () => roomy, () => {}, 64).fullSync(svcs(20), undefined, 1);
  expect(order(roomy.groups[roomy.groups.length - 1])).toEqual(['update be:8', 'update svc:8', 'delete be:8']);
});

test('a service address that moves from a removed service to a new one in the same update stays', async () => {
  const { fake, dp } = mk();
  const a = svc('a', [ep('10.244.1.10')]);
  await dp.fullSync([a], undefined, 1);
  await dp.update([{ key: 'svc/ns/b', old: null, new: svc('b', [ep('10.244.2.10')]) }, { key: 'svc/ns/a', old: a, new: null }], undefined, 2);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.2.10:8080' });
  expect(fake.be.size).toBe(1);
});

test('an update diffs against what the dataplane planned, whatever the change names as old', async () => {
  const { fake, dp } = mk();
  await dp.fullSync([svc('a', [ep('10.244.1.10')])], undefined, 1);
  const notApplied = svc('a', [ep('10.244.1.10'), ep('10.244.1.11')]);
  await dp.update([{ key: 'svc/ns/a', old: notApplied, new: svc('a', [ep('10.244.1.12')]) }], undefined, 2);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.12:8080' });
  expect(fake.be.size).toBe(1);
});

test('a failed batch rejects; the next full sync converges from what the kernel holds', async () => {
  const { fake, dp } = mk();
  const a = svc('a', [ep('10.244.1.10')]);
  await dp.fullSync([a], undefined, 1);
  fake.failAt = 2;
  const a2 = svc('a', [ep('10.244.1.11')]);
  await expect(dp.update([{ key: 'svc/ns/a', old: a, new: a2 }], undefined, 2)).rejects.toThrow(/No space left/);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.10:8080' });   // the previous state still serves
  await dp.fullSync([a2], undefined, 3);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.11:8080' });
  expect(fake.be.size).toBe(1);
});

test('a batch of a first sync that fails ends it once the batches in the kernel are done; the next full sync converges', async () => {
  const services = variedServices(5000);
  const { fake, dp } = mk();
  fake.failAt = 2;
  await expect(dp.fullSync(services, ebpfNode, 1)).rejects.toThrow(/No space left/);
  // Nothing still in the kernel after the rejection: no batch comes after it.
  const sent = fake.groups.length;
  await new Promise((r) => setTimeout(r, 10));
  expect(fake.groups.length).toBe(sent);
  await dp.fullSync(services, ebpfNode, 2);
  const clean = mk();
  await clean.dp.fullSync(services, ebpfNode, 1);
  expect(sent).toBeLessThan(clean.fake.groups.length);
  expect(fake.resolve()).toEqual(clean.fake.resolve());
  expect(fake.be.size).toBe(clean.fake.be.size);
});

test('a first sync: two services claiming one address across batches in the kernel together, the last planned wins', async () => {
  const services = variedServices(3000);
  // Service 2 has external IPs; its twin, planned last, claims them with other endpoints.
  const twin: Service = { ...services[2]!, name: 'twin', namespace: 'other', ports: services[2]!.ports.map((p) => ({ ...p, clusterEndpoints: EndpointList.from([ep('10.250.0.1')]), localEndpoints: EndpointList.from([ep('10.250.0.1')]) })) };
  const all = [...services, twin];
  // The kernel takes the first batch slowly: without ordering, the twin's batch would land first.
  const fake = new FakeEbpfMaps();
  const apply = fake.apply.bind(fake);
  let calls = 0;
  fake.apply = async (groups) => { if (calls++ === 0) await new Promise((r) => setTimeout(r, 500)); return apply(groups); };
  await new EbpfDataplane(async () => fake, () => {}).fullSync(all, ebpfNode, 1);
  const sequential = new FakeEbpfMaps();
  const dp = new EbpfDataplane(async () => sequential, () => {});
  await dp.fullSync(services, ebpfNode, 1);
  await dp.update([{ key: 'svc/other/twin', old: null, new: twin }], ebpfNode, 2);
  expect(calls).toBeGreaterThanOrEqual(2);
  expect(fake.inconsistent()).toEqual([]);
  expect(fake.refusedBetween.size).toBe(0);
  expect(fake.resolve()).toEqual(sequential.resolve());
});

test('sockets are destroyed per (service, protocol, backend) that went away, not for a backend another service keeps', async () => {
  const { fake, dp } = mk();
  const a = svc('a', [ep('10.244.1.10'), ep('10.244.1.11')], { udp: true });
  const b = svc('b', [ep('10.244.1.10')], { udp: true, ip: '10.96.0.2' });
  await dp.fullSync([a, b], undefined, 1);
  expect(fake.destroyCalls).toEqual([]);
  const a2 = svc('a', [ep('10.244.1.11')], { udp: true });
  await dp.update([{ key: 'svc/ns/a', old: a, new: a2 }], undefined, 2);
  expect(fake.destroyCalls).toEqual([['10.96.0.1:80/udp 10.244.1.10:8080']]);
  await dp.update([{ key: 'svc/ns/b', old: b, new: null }], undefined, 3);
  expect(fake.destroyCalls[1]).toEqual(['10.96.0.2:80/udp 10.244.1.10:8080']);
  // A backend that moves to another slot is no backend gone; an unchanged resync destroys nothing.
  const a3 = svc('a', [ep('10.244.1.12'), ep('10.244.1.11')], { udp: true });
  await dp.update([{ key: 'svc/ns/a', old: a2, new: a3 }], undefined, 4);
  await dp.fullSync([a3], undefined, 5);
  expect(fake.destroyCalls.length).toBe(2);
});

test('on a kernel that cannot destroy sockets, nothing is asked of it', async () => {
  const { fake, dp } = mk();
  fake.info.socketDestroyOff = 'the kernel lacks bpf_sock_destroy (kernel >= 6.5)';
  const a = svc('a', [ep('10.244.1.10'), ep('10.244.1.11')]);
  await dp.fullSync([a], undefined, 1);
  await dp.update([{ key: 'svc/ns/a', old: a, new: svc('a', [ep('10.244.1.11')]) }], undefined, 2);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.244.1.11:8080' });
  expect(fake.destroyCalls).toEqual([]);
});

test('the programs are opened when the dataplane is made; a failed open fails the sync and is tried again; close waits for an open in progress', async () => {
  const fake = new FakeEbpfMaps();
  let opens = 0, fail = true, closed = 0;
  fake.close = async () => { closed++; };
  const dp = new EbpfDataplane(async () => {
    opens++;
    await new Promise((r) => setTimeout(r, 5));
    if (fail) throw new Error('open cgroup /x: No such file or directory');
    return fake;
  }, () => {});
  expect(opens).toBe(1); // before any sync
  await expect(dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 1)).rejects.toThrow(/No such file/);
  fail = false;
  await dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 2);
  expect(opens).toBe(2);
  expect(fake.resolve()).toEqual({ '10.96.0.1:80': '10.0.0.1:8080' });
  await dp.close();
  expect(closed).toBe(1);
  // Closed while its open is still running: the loader it yields is closed, not leaked.
  const dp2 = new EbpfDataplane(async () => { await new Promise((r) => setTimeout(r, 20)); return fake; }, () => {});
  await dp2.close();
  expect(closed).toBe(2);
});

test('severed links: told once (log, watch), the loader is reopened at the next sync; while that fails the socket LB is said off, once', async () => {
  const severedOne = new FakeEbpfMaps(), fresh = new FakeEbpfMaps();
  severedOne.close = async () => { closes++; };
  let closes = 0, opens = 0, fail = false;
  const logs: string[] = [], lost: string[] = [];
  const dp = new EbpfDataplane(async () => {
    opens++;
    if (opens === 1) return severedOne;
    if (fail) throw new Error('open cgroup /x: No such file or directory');
    return fresh;
  }, (m) => logs.push(m));
  dp.watch((why) => lost.push(why), 60_000);
  await dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 1);
  severedOne.severedLinks = ['kpng_connect4', 'kpng_sendmsg4'];
  fail = true;
  for (const rev of [2, 3]) await expect(dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, rev)).rejects.toThrow(/No such file/);
  expect(closes).toBe(1);
  expect(lost).toHaveLength(1);
  expect(lost[0]).toMatch(/links were severed .*kpng_connect4, kpng_sendmsg4 run nowhere/);
  expect(logs.filter((l) => /the socket LB is off \(no programs attached\): open cgroup/.test(l))).toHaveLength(1);
  fail = false;
  await dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 4);
  expect(fresh.resolve()).toEqual({ '10.96.0.1:80': '10.0.0.1:8080' });
  expect(logs[logs.length - 1]).toBe('ebpf: the socket LB is programmed again');
  await dp.close();
});

test('maps replaced at the open: the pinned links move to the new programs only once the first full sync filled the new maps', async () => {
  const fake = new FakeEbpfMaps();
  fake.info.pendingLinks = 8;
  const logs: string[] = [];
  const dp = new EbpfDataplane(async () => fake, (m) => logs.push(m));
  fake.failAt = 1;
  await expect(dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 1)).rejects.toThrow(/No space/);
  expect(fake.activated).toBe(0);   // the maps are not filled: the old programs keep balancing
  await dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 2);
  expect(fake.activated).toBe(8);
  expect(logs).toContain('ebpf: 8 pinned links moved to the new programs now that their new maps are filled');
  await dp.fullSync([svc('a', [ep('10.0.0.1')])], undefined, 3);
  expect(fake.activated).toBe(8);
  await dp.close();
});

test('a big full sync gives the event loop turns while it reads the kernel, plans and packs (and converges the same)', async () => {
  const fake = new FakeEbpfMaps();
  // yieldMs 0: every check is due, so the turns counted below do not depend on how fast this machine is.
  const dp = new EbpfDataplane(async () => fake, () => {}, 262144, { yieldMs: 0 });
  const many = (shift: number) => Array.from({ length: 4000 }, (_, i) =>
    svc(`s${i}`, [0, 1, 2, 3, 4].map((k) => ep(`10.200.${(i >> 6) & 255}.${((i & 63) << 2) + ((k + shift) % 4)}`, false)), { ip: `10.96.${i >> 8}.${i & 255}` }));
  // Counts the turns the loop gets while a sync runs, before the kernel is asked to apply anything.
  const turnsBeforeApply = async (services: Service[]) => {
    let turns = 0, atApply = -1, running = true;
    const spin = () => { if (!running) return; turns++; setImmediate(spin); };
    setImmediate(spin);
    const apply = fake.apply.bind(fake);
    fake.apply = async (g) => { if (atApply < 0) atApply = turns; return apply(g); };
    await dp.fullSync(services, undefined, 1);
    running = false;
    fake.apply = apply;
    return atApply;
  };
  expect(await turnsBeforeApply(many(0))).toBeGreaterThan(2);
  const first = fake.resolve();
  // A resync reads back ~44k entries and rewrites what changed: turns too, and the same result as
  // a dataplane that starts from those maps.
  expect(await turnsBeforeApply(many(1))).toBeGreaterThan(2);
  const fresh = new FakeEbpfMaps();
  await new EbpfDataplane(async () => fresh, () => {}, 262144).fullSync(many(1), undefined, 1);
  expect(fake.resolve()).toEqual(fresh.resolve());
  expect(fake.resolve()).not.toEqual(first);
});

test('a stop during a big full sync abandons it at the next turn: no map is written, the previous state stays', async () => {
  const fake = new FakeEbpfMaps();
  const dp = new EbpfDataplane(async () => fake, () => {}, 262144, { yieldMs: 0 });
  await dp.fullSync([svc('a', [ep('10.244.1.10')])], undefined, 1);
  const before = fake.resolve();
  const many = Array.from({ length: 4000 }, (_, i) => svc(`s${i}`, [ep(`10.200.${i >> 8}.${i & 255}`, false)], { ip: `10.96.${i >> 8}.${i & 255}` }));
  const ac = new AbortController();
  const applies = fake.groups.length;
  // Aborted from the event loop, as the SIGTERM handler does, while the sync plans.
  setImmediate(() => ac.abort(new Error('stopping')));
  await expect(dp.fullSync(many, undefined, 2, undefined, ac.signal)).rejects.toThrow('stopping');
  expect(fake.groups.length).toBe(applies);
  expect(fake.resolve()).toEqual(before);
  // The next full sync (the KernelSink's after an abandoned one) converges as usual.
  await dp.fullSync(many, undefined, 3);
  expect(Object.keys(fake.resolve())).toHaveLength(4000);
});

test('without --ebpf-destroy-tcp, TCP sockets of a removed endpoint are left to drain; UDP ones are still destroyed', async () => {
  const { fake, dp } = mk({});
  const tcp = svc('a', [ep('10.244.1.10'), ep('10.244.1.11')]);
  const udp = svc('u', [ep('10.244.1.10'), ep('10.244.1.11')], { ip: '10.96.0.9', udp: true });
  await dp.fullSync([tcp, udp], undefined, 1);
  await dp.update([{ key: 'svc/ns/a', old: tcp, new: svc('a', [ep('10.244.1.11')]) }], undefined, 2);
  expect(fake.destroyCalls).toEqual([]);
  await dp.update([{ key: 'svc/ns/u', old: udp, new: svc('u', [ep('10.244.1.11')], { ip: '10.96.0.9', udp: true }) }], undefined, 3);
  expect(fake.destroyCalls).toEqual([['10.96.0.9:80/udp 10.244.1.10:8080']]);
});

test('tampering between syncs: the audit finds entries another process changed or deleted, once, and the full sync it asks for repairs them', async () => {
  const { fake, dp } = mk();
  const services = variedServices(40);
  await dp.fullSync(services, ebpfNode, 1);
  const want = fake.resolve();
  // Nothing touched: nothing differs (the digests of the dumps and of the plans agree), and an update keeps it so.
  expect(await dp.differences()).toBe(0);
  expect(dp.entryByEntry).toBe(0);
  const a = svc('a', [ep('10.244.1.10')], { ip: '10.96.9.1' });
  await dp.update([{ key: 'svc/ns/a', old: null, new: a }], ebpfNode, 2);
  expect(await dp.differences()).toBe(0);
  await dp.update([{ key: 'svc/ns/a', old: a, new: null }], ebpfNode, 3);
  expect(await dp.differences()).toBe(0);

  // Another process: one backend overwritten, one slot deleted, one entry added.
  const [beId, beValue] = [...fake.be][0]!;
  const other = Buffer.from(beValue);
  other[0] ^= 1;
  fake.be.set(beId, other);
  const slot = [...fake.svc.keys()].find((k) => decodeSvcKey(Buffer.from(k, 'hex')).slot === 1)!;
  fake.svc.delete(slot);
  fake.be.set(999_999, Buffer.from(beValue));
  expect(await dp.differences()).toBe(3);
  expect(dp.entryByEntry).toBe(1);

  const lost: string[] = [];
  const logs: string[] = [];
  const watched = new EbpfDataplane(async () => fake, (m) => logs.push(m), undefined, { auditEveryMs: 10 });
  try {
    await watched.fullSync(services, ebpfNode, 1);   // converges: the tampered entries are rewritten
    expect(fake.resolve()).toEqual(want);
    expect(await watched.differences()).toBe(0);
    watched.watch((why) => lost.push(why));
    fake.be.set(beId, other);
    for (let i = 0; i < 200 && lost.length === 0; i++) await new Promise((res) => setTimeout(res, 10));
    expect(lost).toEqual(["1 entry of the socket LB's maps differ from what kpng wrote (changed by another process)"]);
    expect(logs.at(-1)).toMatch(/^ebpf: 1 entry of the socket LB's maps differ .*; rewriting them$/);
    // Said once until a sync: the audit compares nothing while the maps are known to differ.
    await new Promise((res) => setTimeout(res, 100));
    expect(lost).toHaveLength(1);
    expect(await watched.differences()).toBeUndefined();
    await watched.fullSync(services, ebpfNode, 2);
    expect(fake.resolve()).toEqual(want);
    expect(await watched.differences()).toBe(0);
    expect(watched.auditStats!.found).toBe(1);
  } finally {
    await watched.close();
  }
});

test('the audit compares nothing while a sync is under way or after one failed', async () => {
  const { fake, dp } = mk();
  await dp.fullSync(variedServices(10), ebpfNode, 1);
  fake.failAt = fake.groups.length + 1;
  const b = svc('b', [ep('10.244.1.12')], { ip: '10.96.9.2' });
  await expect(dp.update([{ key: 'svc/ns/b', old: null, new: b }], ebpfNode, 2)).rejects.toThrow(/No space left/);
  expect(await dp.differences()).toBeUndefined();
  await dp.fullSync(variedServices(10), ebpfNode, 3);
  expect(await dp.differences()).toBe(0);
});

test('two services sharing an address: the audit finds nothing (the last planned holds it), and still finds a change', async () => {
  const { fake, dp } = mk();
  const one = svc('one', [ep('10.244.1.10')], { ip: '10.96.0.7' });
  const two = svc('two', [ep('10.244.1.11')], { ip: '10.96.0.7' });
  await dp.fullSync([one, two, svc('c', [ep('10.244.1.12')], { ip: '10.96.0.8' })], undefined, 1);
  expect(fake.resolve()['10.96.0.7:80']).toBe('10.244.1.11:8080');
  expect(await dp.differences()).toBe(0);
  expect(await dp.differences()).toBe(0);   // the maps' digest, verified: no entry-by-entry pass
  const head = [...fake.svc.keys()].find((k) => decodeSvcKey(Buffer.from(k, 'hex')).addr === '10.96.0.8' && decodeSvcKey(Buffer.from(k, 'hex')).slot === 0)!;
  fake.svc.delete(head);
  expect(await dp.differences()).toBe(1);
});

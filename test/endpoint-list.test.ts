// The ENLS endpoint lists by column (src/model/endpoint-list.ts): what goes in comes out, in order,
// through every reader, the wire and the hash; equal lists are equal whichever way they were built.
import { EndpointList, type Endpoint } from '../src/model/endpoint-list';
import { decodeItem, encodeItem, IPFamily, normalizeItem, Protocol, Target, wireItem, type Item } from '../src/model/enls';
import { itemHash } from '../src/store/item-store';
import { computeServiceItem } from '../src/model/compute';
import { parseEndpointSlice, parseService } from '../src/model/parse';
import * as k8s from './shared/objects';

const ep = (ip: string, o: Partial<Endpoint> = {}): Endpoint => ({ ip, port: 8080, local: false, terminating: false, ...o });

const mixed: Endpoint[] = [
  ep('10.0.0.1'),
  ep('10.0.0.2', { local: true }),
  ep('10.0.0.3', { terminating: true }),
  ep('fd00::4', { port: 9090, local: true, terminating: true }),
];

describe('EndpointList', () => {
  test('every endpoint reads back as it went in, by column, by index, by iteration, as JSON', () => {
    const l = EndpointList.from(mixed);
    expect(l.length).toBe(4);
    expect(l.toArray()).toEqual(mixed);
    expect([...l]).toEqual(mixed);
    expect(JSON.parse(JSON.stringify(l))).toEqual(mixed);
    expect(l.at(1)).toEqual(mixed[1]);
    expect(l.at(-1)).toEqual(mixed[3]);
    expect(l.at(4)).toBeUndefined();
    expect(l.at(-5)).toBeUndefined();
    expect([l.ip(3), l.port(3), l.port(0), l.local(1), l.local(2), l.terminating(2), l.terminating(1)]).toEqual(['fd00::4', 9090, 8080, true, false, true, false]);
    expect(l.map((e, i) => `${i}:${e.ip}`)).toEqual(['0:10.0.0.1', '1:10.0.0.2', '2:10.0.0.3', '3:fd00::4']);
    expect(l.filter((e) => e.local).map((e) => e.ip)).toEqual(['10.0.0.2', 'fd00::4']);
    expect(l.some((e) => e.terminating && !e.local)).toBe(true);
    expect(l.some((e) => e.port === 1)).toBe(false);
  });

  test('the objects it hands out are copies: changing one changes nothing in the list', () => {
    const l = EndpointList.from(mixed);
    l.at(0)!.ip = '1.1.1.1';
    for (const e of l) e.port = 1;
    expect(l.toArray()).toEqual(mixed);
  });

  test('built from columns or from objects, equal content is equal (toEqual, equals, hash)', () => {
    const a = EndpointList.build(['10.0.0.1', '10.0.0.2'], [80, 80], [false, true], false);
    const b = EndpointList.from([ep('10.0.0.1', { port: 80 }), ep('10.0.0.2', { port: 80, local: true })]);
    expect(a).toEqual(b);
    expect(a.equals(b)).toBe(true);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    const c = EndpointList.build(['10.0.0.1', '10.0.0.2'], [80, 81], false, false);
    expect(c.equals(a)).toBe(false);
    expect(c.port(1)).toBe(81);
    expect(EndpointList.build(['10.0.0.1', '10.0.0.2'], [80, 80], [false, false], true).equals(EndpointList.build(['10.0.0.1', '10.0.0.2'], [80, 80], false, false))).toBe(false);
    expect(EndpointList.from([])).toBe(EndpointList.EMPTY);
    expect(EndpointList.build([], [], false, false)).toBe(EndpointList.EMPTY);
  });

  test('a long list (past one chunk of flags) keeps every flag in place', () => {
    const eps = Array.from({ length: 10_001 }, (_, i) => ep(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, { port: 1000 + (i % 7), local: i % 3 === 0, terminating: i % 5 === 0 }));
    const l = EndpointList.from(eps);
    expect(l.length).toBe(10_001);
    expect(l.toArray()).toEqual(eps);
  });

  test('through the wire (protobuf), normalizeItem and the item hash, lists keep their content', () => {
    const route = { target: Target.CLUSTER, masquerade: false };
    const item: Item = normalizeItem({
      key: 'svc/default/web',
      service: {
        namespace: 'default', name: 'web', type: 'ClusterIP', clusterIps: { v4: ['10.96.0.1'], v6: [] },
        ports: [{ port: { name: 'http', protocol: Protocol.TCP, port: 80, nodePort: 0 }, family: IPFamily.IPV4, clusterEndpoints: mixed, localEndpoints: mixed.filter((e) => e.local), clusterIp: { pod: route, node: route, other: route } }],
      },
    });
    const sp = item.service!.ports[0]!;
    expect(sp.clusterEndpoints).toBeInstanceOf(EndpointList);
    expect(sp.clusterEndpoints.toArray()).toEqual(mixed);
    expect(normalizeItem(item).service!.ports[0]!.clusterEndpoints).toBe(sp.clusterEndpoints);
    const back = decodeItem(encodeItem(item));
    expect(back).toEqual(item);
    expect(itemHash(back)).toBe(itemHash(item));
    // The wire copy has arrays; the item itself is untouched.
    expect(wireItem(item).service!.ports![0]!.clusterEndpoints).toEqual(mixed);
    expect(item.service!.ports[0]!.clusterEndpoints).toBe(sp.clusterEndpoints);
  });

  test('the model builds one list object per port, with the port stored once and shared flags', () => {
    const svc = parseService(k8s.svc('web', { clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
    const slice = (name: string, node: string) =>
      parseEndpointSlice(k8s.slice(name, 'web', [1, 2, 3].map((k) => k8s.ep(`10.244.${name.length}.${k}`, { ready: true, node }))));
    if (!svc.ok) throw new Error(svc.reason);
    const [s1, s2] = [slice('web-a', 'n2'), slice('web-bb', 'n3')];
    if (!s1.ok || !s2.ok) throw new Error('bad slice');
    const a = computeServiceItem(svc.value, [s1.value.slice], { name: 'n1', zone: '', primary: [] }).service!.ports[0]!.clusterEndpoints;
    const b = computeServiceItem(svc.value, [s2.value.slice], { name: 'n1', zone: '', primary: [] }).service!.ports[0]!.clusterEndpoints;
    expect(a.map((e) => `${e.ip}:${e.port}:${e.local}`)).toEqual(['10.244.5.1:8080:false', '10.244.5.2:8080:false', '10.244.5.3:8080:false']);
    // Nothing local, nothing terminating, three endpoints: one flags string for both lists.
    expect((a as unknown as { flags: string }).flags).toBe((b as unknown as { flags: string }).flags);
    expect((a as unknown as { ports: unknown }).ports).toBe(8080);
  });
});

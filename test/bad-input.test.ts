// Bad input: the object (or the endpoint) is skipped with one warning naming it and the
// reason; everything else keeps working; nothing throws.
import fc from 'fast-check';
import { cluster, ep, slice, svc } from './helpers/k8s';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import { routeRows } from '../src/sink/routes';
import { parseObjectsText } from '../src/source/objects-file';
import { silentLogger } from '../src/util/log';

const good = () => [svc('good', { clusterIPs: ['10.96.0.2'] }), slice('good-1', 'good', [ep('10.244.1.1')])];
const goodRoute = { service: 'default/good', protocol: 'TCP', port: 80, internal: ['10.244.1.1:8080'], external: [] };

describe('a bad Service is skipped with one warning; others keep working', () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['invalid cluster IP', svc('bad', { clusterIPs: ['10.96.0.300'] }), /Service default\/bad: spec.clusterIPs\[0\] "10.96.0.300" is not an IP address/],
    ['port out of range', svc('bad', { ports: [{ port: 70000 }] }), /Service default\/bad: spec.ports\[0\].port 70000 out of range/],
    ['port not a number', svc('bad', { ports: [{ port: '80' }] }), /spec.ports\[0\].port "80" is not a port number/],
    ['unknown protocol', svc('bad', { ports: [{ port: 80, protocol: 'ICMP' }] }), /spec.ports\[0\].protocol "ICMP" is not TCP, UDP or SCTP/],
    ['missing cluster IP', { kind: 'Service', metadata: { namespace: 'default', name: 'bad' }, spec: { ports: [{ port: 80 }] } }, /spec.clusterIP is missing/],
    ['unknown type', svc('bad', { type: 'Weird' }), /spec.type "Weird" is unknown/],
    ['bad affinity timeout', svc('bad', { affinity: 999999 }), /timeoutSeconds 999999 out of range/],
    ['absurd number of ports', svc('bad', { ports: Array.from({ length: 5000 }, (_, i) => ({ name: `p${i}`, port: i + 1 })) }), /spec.ports has 5000 entries/],
    ['spec not an object', { kind: 'Service', metadata: { namespace: 'default', name: 'bad' }, spec: 'nope' }, /spec is not an object/],
  ];
  test.each(cases)('%s', (_name, bad, reason) => {
    const c = cluster('n1', [...good(), bad, slice('bad-1', 'bad', [ep('10.244.1.9')])]);
    expect(c.routes()).toEqual([goodRoute]);
    expect(c.warnings).toHaveLength(1);
    expect(c.warnings[0]).toMatch(/^warn: skipping Service default\/bad: /);
    expect(c.warnings[0]).toMatch(reason);
  });

  test('a service without a name', () => {
    const c = cluster('n1', [...good(), { kind: 'Service', metadata: {}, spec: {} }]);
    expect(c.routes()).toEqual([goodRoute]);
    expect(c.warnings).toEqual(['warn: skipping Service <no name>: metadata.name is missing']);
  });

  test('a service that becomes invalid stops being proxied; fixed, it comes back; the warning is said once', () => {
    const c = cluster('n1', good());
    const bad = svc('good', { clusterIPs: ['10.96.0.2'], ports: [{ port: -1 }] });
    c.add(bad);
    c.add(bad);
    expect(c.routes()).toEqual([]);
    expect(c.warnings).toHaveLength(1);
    c.add(good()[0]);
    expect(c.routes()).toEqual([goodRoute]);
  });
});

describe('bad EndpointSlices and endpoints', () => {
  test('a slice without a service label is skipped', () => {
    const bad = { ...slice('orphan', 'x', [ep('10.244.1.7')]), metadata: { namespace: 'default', name: 'orphan' } };
    const c = cluster('n1', [...good(), bad]);
    expect(c.routes()).toEqual([goodRoute]);
    expect(c.warnings).toEqual(['warn: skipping EndpointSlice default/orphan: label kubernetes.io/service-name is missing']);
  });

  test('an invalid endpoint is dropped, the rest of its slice is kept', () => {
    const c = cluster('n1', [svc('good', { clusterIPs: ['10.96.0.2'] }), slice('good-1', 'good', [ep('10.244.1.1'), ep('10.244.1.999'), ep('fd00::1')])]);
    expect(c.routes()).toEqual([goodRoute]);
    expect(c.warnings).toHaveLength(1);
    expect(c.warnings[0]).toMatch(/EndpointSlice default\/good-1: dropped 2 endpoint\(s\): endpoints\[1\].addresses\[0\] "10.244.1.999" is not an IP address; endpoints\[2\].addresses\[0\] fd00::1 is not IPv4/);
  });

  test('slice port out of range, unknown address type, absurd size', () => {
    const c = cluster('n1', [
      ...good(),
      slice('p', 'good', [ep('10.244.1.2')], { ports: [{ name: 'http', port: 0 }] }),
      slice('f', 'good', [ep('10.244.1.3')], { family: 'IPv5' }),
      slice('big', 'good', Array.from({ length: 1001 }, (_, i) => ep(`10.245.${i >> 8}.${i & 255}`))),
    ]);
    expect(c.routes()).toEqual([goodRoute]);
    expect(c.warnings.sort()).toEqual([
      'warn: skipping EndpointSlice default/big: endpoints has 1001 entries (more than 1000)',
      'warn: skipping EndpointSlice default/f: addressType "IPv5" is not IPv4 or IPv6',
      'warn: skipping EndpointSlice default/p: ports[0].port 0 out of range (1-65535)',
    ]);
  });
});

describe('file parsing', () => {
  test('a List, a multi-document stream and JSON all work', () => {
    const list = parseObjectsText('{"kind":"List","items":[{"kind":"Service","metadata":{"name":"a"}},{"kind":"Pod"}]}');
    expect(list.Service).toHaveLength(1);
    expect(list.ignored).toBe(1);
    const stream = parseObjectsText('kind: Service\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: n1}\n');
    expect([stream.Service.length, stream.Node.length]).toEqual([1, 1]);
  });

  test('an EndpointSlice of another API version is noted and ignored', () => {
    const r = parseObjectsText('kind: EndpointSlice\napiVersion: discovery.k8s.io/v1beta1\nmetadata: {name: s}\n');
    expect(r.EndpointSlice).toEqual([]);
    expect(r.notes[0]).toMatch(/v1beta1/);
  });

  test('text that is not YAML is an error, not a crash', () => {
    expect(() => parseObjectsText('kind: [unclosed')).toThrow(/not valid YAML or JSON/);
  });
});

// Random and mangled objects: the pipeline never throws, whatever arrives.
describe('property: never throws on random or mangled input', () => {
  const anyJson = fc.jsonValue({ maxDepth: 4 });
  const mangle = (base: Record<string, unknown>) =>
    fc.tuple(fc.array(fc.tuple(fc.constantFrom('metadata', 'spec', 'status', 'endpoints', 'ports', 'addressType', 'kind', 'metadata.labels', 'spec.ports', 'spec.clusterIPs', 'endpoints.0', 'endpoints.0.conditions', 'ports.0.port', 'spec.ports.0', 'spec.ports.0.port', 'endpoints.0.addresses', 'endpoints.0.hints'), anyJson), { maxLength: 4 }))
      .map(([edits]) => {
        const o = structuredClone(base);
        for (const [p, v] of edits) {
          const parts = p.split('.');
          let cur: Record<string, unknown> = o;
          for (const k of parts.slice(0, -1)) {
            if (typeof cur[k] !== 'object' || cur[k] === null) cur[k] = {};
            cur = cur[k] as Record<string, unknown>;
          }
          cur[parts[parts.length - 1]] = v;
        }
        return o;
      });

  test('ClusterStore + NodeState + routes', () => {
    fc.assert(fc.property(
      fc.array(fc.oneof(mangle(svc('web')), mangle(slice('web-1', 'web', [ep('10.244.1.1', { zones: ['a'] })])), mangle({ kind: 'Node', metadata: { name: 'n1' } }), anyJson), { maxLength: 8 }),
      fc.array(fc.boolean(), { maxLength: 8 }),
      (objs, deletes) => {
        const store = new ClusterStore({ log: silentLogger });
        const state = new NodeState(store, 'n1');
        objs.forEach((o, i) => {
          for (const kind of ['Service', 'EndpointSlice', 'Node'] as const) store.apply(kind, o, deletes[i] ?? false);
        });
        store.replace('Service', objs);
        store.flush();
        routeRows(state.items());
      },
    ), { numRuns: 500 });
  });

  test('the file parser throws only its own clear error', () => {
    fc.assert(fc.property(fc.string({ maxLength: 200 }), (text) => {
      try {
        parseObjectsText(text);
      } catch (e) {
        expect((e as Error).message).toMatch(/^not valid YAML or JSON/);
      }
    }), { numRuns: 300 });
  });
});

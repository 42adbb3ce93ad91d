// Node states of one cluster share the items that are alike on their nodes: the same object
// for every node of a class, items of their own only where a service names the node. Checked
// against the model computed from scratch for each node, through random changes.
import fc from 'fast-check';
import { computeNodeItem, computeServiceItem } from '../src/model/compute';
import { NODE_KEY, serviceKey } from '../src/model/enls';
import { ClusterStore } from '../src/store/cluster';
import { DEFAULT_MODEL_OPTIONS } from '../src/model/options';
import { itemHash, SHARED_BLOCK, type ItemList } from '../src/store/item-store';
import { NodeState } from '../src/store/node-state';
import { silentLogger } from '../src/util/log';
import { ep, node, slice, svc } from './helpers/k8s';

type Obj = Record<string, unknown>;
const NODES = ['n1', 'n2', 'n3', 'n4'];

function world(objects: Obj[]) {
  const store = new ClusterStore({ log: silentLogger, model: { ...DEFAULT_MODEL_OPTIONS, clusterCIDRs: ['10.244.0.0/16'], nodePortAddresses: [] } });
  const add = (...objs: Obj[]) => { for (const o of objs) store.apply(o.kind as 'Service', o); store.flush(); };
  const del = (...objs: Obj[]) => { for (const o of objs) store.apply(o.kind as 'Service', o, true); store.flush(); };
  add(...objects);
  store.markSynced();
  const states = new Map(NODES.map((n) => [n, new NodeState(store, n)]));
  return { store, add, del, states, revs: () => NODES.map((n) => states.get(n)!.revision) };
}

/** Every item of a node state, as the model computes it for that node alone. */
function fromScratch(store: ClusterStore, name: string): Map<string, string> {
  const spec = store.getNode(name);
  const view = { name, zone: spec?.zone ?? '', primary: spec?.primary ?? [] };
  const out = new Map([[NODE_KEY, itemHash(computeNodeItem(name, spec, store.modelOptions))]]);
  for (const key of store.serviceKeys()) {
    const item = computeServiceItem(store.getService(key)!, store.slicesOf(key), view, store.modelOptions);
    out.set(item.key, itemHash(item));
  }
  return out;
}

const hashes = (s: NodeState) => new Map(s.keys().map((k) => [k, s.hashOf(k)!]));

describe('items shared between node states', () => {
  const base = () => world([
    node('n1', 'zone-a'), node('n2', 'zone-a'), node('n3', 'zone-b'), node('n4', 'zone-b'),
    svc('web'), slice('web-1', 'web', [ep('10.244.1.1', { node: 'n1' }), ep('10.244.3.1', { node: 'n3' })]),
    svc('db', { clusterIPs: ['10.96.0.2'], itp: 'Local' }), slice('db-1', 'db', [ep('10.244.1.2', { node: 'n1' }), ep('10.244.3.2', { node: 'n3' })]),
  ]);

  test('nodes the service does not name hold the very same item object; named nodes hold their own', () => {
    const w = base();
    const [n1, n2, n3, n4] = NODES.map((n) => w.states.get(n)!);
    const web = serviceKey('default', 'web');
    expect(n2.get(web)).toBe(n4.get(web));
    expect(n2.isOwn(web)).toBe(false);
    expect(n1.isOwn(web)).toBe(true);
    expect(n1.get(web)).not.toBe(n3.get(web));
    expect(n1.get(web)!.service!.ports[0].clusterEndpoints.map((e) => e.local)).toEqual([true, false]);
    expect(n2.get(web)!.service!.ports[0].clusterEndpoints.map((e) => e.local)).toEqual([false, false]);
    // What a node holds itself: its node item and the two services with an endpoint on it.
    expect([n1.ownCount, n2.ownCount, n3.ownCount, n4.ownCount]).toEqual([3, 1, 3, 1]);
    for (const s of [n1, n2, n3, n4]) expect(hashes(s)).toEqual(fromScratch(w.store, s.node));
  });

  test('a change of node n1\'s local endpoints only bumps n1\'s revision', () => {
    const w = base();
    const before = w.revs();
    // db has internalTrafficPolicy Local: a second endpoint on n1 changes only what n1 routes to.
    w.add(slice('db-1', 'db', [ep('10.244.1.2', { node: 'n1' }), ep('10.244.1.3', { node: 'n1' }), ep('10.244.3.2', { node: 'n3' })]));
    expect(w.revs()).toEqual([before[0] + 1, before[1], before[2], before[3]]);
    expect(w.states.get('n1')!.get(serviceKey('default', 'db'))!.service!.ports[0].localEndpoints.map((e) => e.ip)).toEqual(['10.244.1.2', '10.244.1.3']);
    // An endpoint of web moving from n1 to n2 (same address): n1 and n2 change, n3 and n4 see the same endpoints.
    w.add(slice('web-1', 'web', [ep('10.244.1.1', { node: 'n2' }), ep('10.244.3.1', { node: 'n3' })]));
    expect(w.revs()).toEqual([before[0] + 2, before[1] + 1, before[2], before[3]]);
    expect(w.states.get('n1')!.isOwn(serviceKey('default', 'web'))).toBe(false);
    for (const s of w.states.values()) expect(hashes(s)).toEqual(fromScratch(w.store, s.node));
  });

  // Without fillers a node owns most items (its own are merged in one pass); with 100 services that
  // name no node it owns few (found by binary search).
  test.each([0, 100])('a full list read on demand stays the state it was taken from while the cluster changes (%i fillers)', (fillers) => {
    const w = world([
      ...Array.from({ length: fillers }, (_, i) => svc(`filler-${i}`, { clusterIPs: [`10.96.1.${i + 1}`] })),
      node('n1', 'zone-a'), node('n2', 'zone-b'),
      svc('web', { trafficDistribution: 'PreferClose' }),
      slice('web-1', 'web', [ep('10.244.9.1', { zones: ['zone-a'], node: 'n1' }), ep('10.244.9.2', { zones: ['zone-b'] })]),
      svc('db', { clusterIPs: ['10.96.0.2'], itp: 'Local' }), slice('db-1', 'db', [ep('10.244.1.2', { node: 'n1' })]),
      svc('cache', { clusterIPs: ['10.96.0.3'] }), slice('cache-1', 'cache', [ep('10.244.2.3', { node: 'n2' })]),
    ]);
    for (const n of ['n1', 'n2']) {
      const s = w.states.get(n)!;
      const list = s.fullList(), expected = s.itemList();
      const read = () => Array.from({ length: list.length }, (_, i) => list.at(i));
      expect(read()).toEqual(expected);
      // Own items, shared ones, a zone-dependent one, a service gone and one new, the node's zone.
      w.add(slice('db-1', 'db', [ep('10.244.1.2', { node: 'n1' }), ep('10.244.1.7', { node: 'n1' })]));
      w.add(slice('web-1', 'web', [ep('10.244.9.1', { zones: ['zone-a'] }), ep('10.244.9.3', { zones: ['zone-b'], node: 'n2' })]));
      w.del(svc('cache', { clusterIPs: ['10.96.0.3'] }));
      w.add(svc('new', { clusterIPs: ['10.96.0.4'] }));
      w.add(node(n, 'zone-c'));
      expect(s.itemList()).not.toEqual(expected);
      const after = read();
      expect(after).toHaveLength(expected.length);
      for (let i = 0; i < expected.length; i++) expect(after[i]).toBe(expected[i]);
      expect(list.at(expected.length)).toBeUndefined();
    }
  });

  test('shared blocks: one array for every node holding nothing of its own there, with the items at() reads', () => {
    const f = (i: number) => `f-${String(i).padStart(2, '0')}`;
    const w = world([
      node('n1', 'zone-a'), node('n2', 'zone-a'), node('n3', 'zone-b'),
      ...Array.from({ length: 100 }, (_, i) => svc(f(i), { clusterIPs: [`10.96.1.${i + 1}`], ...(i === 40 ? { trafficDistribution: 'PreferClose' } : {}) })),
      slice('f-20-1', f(20), [ep('10.244.1.20', { node: 'n1' })]),
      slice('f-40-1', f(40), [ep('10.244.9.1', { zones: ['zone-a'] }), ep('10.244.9.2', { zones: ['zone-b'] })]),
    ]);
    const B = SHARED_BLOCK;
    const lists = NODES.slice(0, 3).map((n) => w.states.get(n)!.fullList());
    const keys = w.states.get('n1')!.keys();
    const blockOf = (name: string) => Math.floor(keys.indexOf(serviceKey('default', name)) / B) * B;
    const at = (list: ItemList, b: number) => lists.indexOf(list) >= 0 && list.sharedBlock!(b);
    for (const list of lists) {
      for (let b = 0; b + B <= list.length; b += B) {
        const block = list.sharedBlock!(b);
        if (block) for (let j = 0; j < B; j++) expect(block[j]).toBe(list.at(b + j));
      }
      expect(list.sharedBlock!(0)).toBeUndefined(); // "node": every node's own
      expect(list.sharedBlock!(blockOf(f(40)))).toBeUndefined(); // an item per zone there
      expect(list.sharedBlock!(B + 1)).toBeUndefined(); // not a block's start
      expect(list.sharedBlock!(Math.floor(list.length / B) * B)).toBeUndefined(); // the last, partial
    }
    const [n1, n2, n3] = lists;
    const f20 = blockOf(f(20)), f70 = blockOf(f(70));
    expect(f20).not.toBe(blockOf(f(40)));
    expect(at(n1, f20)).toBeUndefined(); // n1 has f-20 of its own
    expect(at(n2, f20)).toBeDefined();
    expect(at(n2, f20)).toBe(at(n3, f20));
    expect(at(n1, f70)).toBeDefined();
    expect(at(n1, f70)).toBe(at(n2, f70));
    expect(at(n1, f70)).toBe(at(n3, f70));
    // A new service moves every later item: new blocks; the list taken before reads its own state.
    const before = n2.sharedBlock!(f70);
    w.add(svc('e-new', { clusterIPs: ['10.96.2.1'] }));
    const now = w.states.get('n2')!.fullList();
    expect(now.sharedBlock!(f70)).toBeDefined();
    expect(now.sharedBlock!(f70)).not.toBe(before);
    expect(n2.sharedBlock!(f70)).toBe(before);
    for (let j = 0; j < B; j++) expect(before![j]).toBe(n2.at(f70 + j));
  });

  test('items() merges as it is read and survives the state changing between reads', () => {
    const w = base();
    const n1 = w.states.get('n1')!;
    expect([...n1.items()]).toEqual(n1.itemList());
    // Read one item, then the node loses its own item of web (its endpoint leaves n1), then read on.
    const it = n1.items()[Symbol.iterator]();
    const first = it.next().value!;
    w.add(slice('web-1', 'web', [ep('10.244.3.1', { node: 'n3' })]));
    const rest: typeof first[] = [];
    for (let r = it.next(); !r.done; r = it.next()) rest.push(r.value);
    expect([first, ...rest].map((i) => i.key)).toEqual(n1.keys());
    expect(rest.find((i) => i.key === serviceKey('default', 'web'))).toEqual(n1.get(serviceKey('default', 'web')));
  });

  test('zone hints: one shared item per zone', () => {
    const w = world([
      node('n1', 'zone-a'), node('n2', 'zone-a'), node('n3', 'zone-b'), node('n4', 'zone-b'),
      svc('web', { trafficDistribution: 'PreferClose' }),
      slice('web-1', 'web', [ep('10.244.9.1', { zones: ['zone-a'] }), ep('10.244.9.2', { zones: ['zone-b'] })]),
    ]);
    const key = serviceKey('default', 'web');
    const [n1, n2, n3, n4] = NODES.map((n) => w.states.get(n)!);
    expect(n1.get(key)).toBe(n2.get(key));
    expect(n3.get(key)).toBe(n4.get(key));
    expect(n1.get(key)!.service!.ports[0].clusterEndpoints.map((e) => e.ip)).toEqual(['10.244.9.1']);
    expect(n3.get(key)!.service!.ports[0].clusterEndpoints.map((e) => e.ip)).toEqual(['10.244.9.2']);
    // n2 moves to zone-b: its state follows, its revision moves, n1's does not.
    const before = w.revs();
    w.add(node('n2', 'zone-b'));
    expect(w.revs()).toEqual([before[0], before[1] + 1, before[2], before[3]]);
    expect(n2.get(key)).toBe(n3.get(key));
  });

  test('a subscriber of one node gets only that node\'s changes', async () => {
    const w = base();
    const sub2 = w.states.get('n2')!.subscribe();
    expect((await sub2.next()).reset).toBe(true);
    w.add(slice('db-1', 'db', [ep('10.244.1.2', { node: 'n1' }), ep('10.244.1.3', { node: 'n1' }), ep('10.244.3.2', { node: 'n3' })]));
    expect(sub2.pending).toBe(false); // n1's change is not n2's: nothing to send
    w.add(svc('api', { clusterIPs: ['10.96.0.3'] }));
    expect((await sub2.next()).changes.map((c) => `${c.op} ${c.key}`)).toEqual(['set svc/default/api']);
  });

  test('a node state opened after all others closed sees the changes made meanwhile', () => {
    const w = base();
    for (const s of w.states.values()) s.close();
    w.add(slice('web-1', 'web', [ep('10.244.1.9', { node: 'n2' })]), svc('api', { clusterIPs: ['10.96.0.3'] }));
    w.del(svc('db'));
    for (const n of NODES) {
      const s = new NodeState(w.store, n);
      expect(hashes(s)).toEqual(fromScratch(w.store, n));
      s.close();
    }
  });

  // Random clusters and random changes: every node state equals the model computed from scratch for
  // its node, and a node's revision moves exactly when one of its items changed.
  const endpointArb = fc.record({
    host: fc.integer({ min: 0, max: 5 }), // 4, 5: no node / a node without a Node object
    ready: fc.boolean(), terminating: fc.boolean(),
    zones: fc.constantFrom(undefined, ['zone-a'], ['zone-b'], ['zone-a', 'zone-b']),
    nodes: fc.constantFrom(undefined, ['n1'], ['n2', 'n3']),
  });
  const svcArb = fc.record({
    type: fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer'),
    itp: fc.constantFrom(undefined, 'Local'), etp: fc.constantFrom(undefined, 'Local'),
    ranges: fc.constantFrom(undefined, ['192.168.50.0/24'], ['203.0.113.0/24']),
    eps: fc.array(endpointArb, { maxLength: 4 }),
  });
  const stepArb = fc.oneof(
    fc.record({ kind: fc.constant('svc' as const), i: fc.integer({ min: 0, max: 3 }), spec: svcArb }),
    fc.record({ kind: fc.constant('delete' as const), i: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('node' as const), n: fc.integer({ min: 0, max: 3 }), zone: fc.constantFrom('zone-a', 'zone-b', ''), addr: fc.constantFrom('192.168.50.1', '203.0.113.7') }),
  );
  type SvcArb = typeof svcArb extends fc.Arbitrary<infer T> ? T : never;
  const objs = (i: number, s: SvcArb): Obj[] => [
    svc(`s${i}`, { clusterIPs: [`10.96.1.${i}`], type: s.type, itp: s.itp, etp: s.etp, sourceRanges: s.ranges && [...s.ranges], lbIPs: s.type === 'LoadBalancer' ? [`198.51.100.${i}`] : undefined,
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http', nodePort: s.type === 'ClusterIP' ? undefined : 30000 + i }] }),
    slice(`s${i}-a`, `s${i}`, s.eps.map((e, k) => ep(`10.244.${i}.${k + 1}`, { node: ['n1', 'n2', 'n3', 'n4', undefined, 'n9'][e.host], ready: e.ready, serving: e.ready || e.terminating, terminating: e.terminating, zones: e.zones && [...e.zones], nodes: e.nodes && [...e.nodes] }))),
  ];

  test('random changes: every node state equals its model from scratch; revisions move only with it', () => {
    fc.assert(fc.property(fc.array(svcArb, { minLength: 4, maxLength: 4 }), fc.array(stepArb, { maxLength: 12 }), (svcs, steps) => {
      const w = world([node('n1', 'zone-a'), node('n2', 'zone-a'), node('n3', 'zone-b'), ...svcs.flatMap((s, i) => objs(i, s))]);
      const check = () => { for (const s of w.states.values()) expect(hashes(s)).toEqual(fromScratch(w.store, s.node)); };
      check();
      for (const step of steps) {
        const before = NODES.map((n) => hashes(w.states.get(n)!));
        const revs = w.revs();
        if (step.kind === 'svc') w.add(...objs(step.i, step.spec));
        else if (step.kind === 'delete') w.del(...objs(step.i, { type: 'ClusterIP', eps: [] } as unknown as SvcArb));
        else {
          const n = node(NODES[step.n], step.zone || undefined);
          (n.status as { addresses: unknown }).addresses = [{ type: 'InternalIP', address: step.addr }];
          w.add(n);
        }
        check();
        NODES.forEach((n, k) => {
          const moved = JSON.stringify([...before[k]]) !== JSON.stringify([...hashes(w.states.get(n)!)]);
          expect(w.revs()[k]).toBe(revs[k] + (moved ? 1 : 0));
        });
      }
    }), { numRuns: 150 });
  });
});

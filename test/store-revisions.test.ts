// Revisions move only when this node's state changes; consumers pull coalesced batches.
import { cluster, ep, node, slice, svc } from './helpers/k8s';
import { formatStats, StatsMeter } from '../src/stats';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import { SharedItems } from '../src/store/shared-items';
import { silentLogger } from '../src/util/log';

describe('revisions', () => {
  const base = () => cluster('n1', [node('n1', 'zone-a'), svc('web'), slice('web-1', 'web', [ep('10.244.1.1', { node: 'n1' })])]);

  test('updates that change nothing proxy-relevant make no revision', () => {
    const c = base();
    const rev = c.state.revision;
    const noisy = svc('web', { labels: { team: 'x' }, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } });
    (noisy.metadata as Record<string, unknown>).resourceVersion = '999';
    (noisy.metadata as Record<string, unknown>).managedFields = [{ manager: 'kubectl' }];
    c.add(noisy);
    // Node heartbeat: conditions and a new resourceVersion.
    c.add(node('n1', 'zone-a', { conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: new Date().toISOString() }] }));
    // Another node's change does not concern n1 unless it changes n1's endpoints.
    c.add(node('n2', 'zone-b'));
    // A not-ready endpoint appearing changes no route (and no item: not-ready endpoints are not in the ENLS).
    c.add(slice('web-1', 'web', [ep('10.244.1.1', { node: 'n1' }), ep('10.244.1.2', { ready: false })]));
    expect(c.state.revision).toBe(rev);
    expect(c.store.events).toBeGreaterThan(4);
  });

  test('a real change makes exactly one revision per flush', () => {
    const c = base();
    const rev = c.state.revision;
    c.add(slice('web-1', 'web', [ep('10.244.1.1', { node: 'n1' }), ep('10.244.1.3')]), svc('api', { clusterIPs: ['10.96.0.9'] }));
    expect(c.state.revision).toBe(rev + 1);
    c.del(svc('api'));
    expect(c.state.revision).toBe(rev + 2);
  });
});

describe('pull subscriptions', () => {
  test('first batch is a reset with everything; later ones carry only changes, coalesced', async () => {
    const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
    const sub = c.state.subscribe();
    const first = await sub.next();
    expect(first.reset).toBe(true);
    expect(first.changes.map((x) => `${x.op} ${x.key}`)).toEqual(['set node', 'set svc/default/web']);

    // While the consumer is "busy", many changes happen: it gets their net effect once.
    for (let i = 2; i < 20; i++) c.add(slice('web-1', 'web', [ep(`10.244.1.${i}`)]));
    c.add(svc('tmp', { clusterIPs: ['10.96.0.7'] }));
    c.del(svc('tmp'));
    c.add(svc('api', { clusterIPs: ['10.96.0.8'] }));
    const second = await sub.next();
    expect(second.reset).toBe(false);
    expect(second.changes.map((x) => `${x.op} ${x.key}`)).toEqual(['set svc/default/api', 'set svc/default/web']);
    expect(second.revision).toBe(c.state.revision);
    const web = second.changes.find((x) => x.key === 'svc/default/web');
    expect(web?.op === 'set' && web.item.service!.ports[0].clusterEndpoints.map((e) => e.ip)).toEqual(['10.244.1.19']);

    c.del(svc('api'));
    expect((await sub.next()).changes).toEqual([{ op: 'delete', key: 'svc/default/api' }]);
  });

  test('a change that flaps back before the consumer asks gives it nothing', async () => {
    const c = cluster('n1', [svc('web'), slice('web-1', 'web', [ep('10.244.1.1')])]);
    const sub = c.state.subscribe();
    await sub.next();
    c.add(slice('web-1', 'web', [ep('10.244.1.2')]));
    c.add(slice('web-1', 'web', [ep('10.244.1.1')]));
    await sub.ready();
    expect(sub.take().changes).toEqual([]);
  });

  test('no batch before the source is synced (an empty first sync would wipe rules)', async () => {
    const store = new ClusterStore({ log: silentLogger });
    const state = new NodeState(store, 'n1');
    const sub = state.subscribe();
    let got = false;
    const p = sub.next().then(() => { got = true; });
    store.apply('Service', svc('web'));
    await new Promise((r) => setTimeout(r, 20));
    expect(got).toBe(false);
    store.markSynced();
    await p;
    expect(got).toBe(true);
  });

  test('requestReset makes the next batch a full reset', async () => {
    const c = cluster('n1', [svc('web')]);
    const sub = c.state.subscribe();
    await sub.next();
    sub.requestReset();
    const b = await sub.next();
    expect(b.reset).toBe(true);
    expect(b.changes).toHaveLength(2);
  });
});

describe('stats line', () => {
  test('memory is reported in MiB of resident memory, CPU per interval', () => {
    const meter = new StatsMeter({ events: () => 200, revision: () => 3 });
    const end = Date.now() + 30;
    while (Date.now() < end) { /* burn CPU so the interval has some */ }
    const s = meter.sample();
    const rssMiB = process.memoryUsage.rss() / 1048576;
    expect(Math.abs(s.memMiB - rssMiB)).toBeLessThan(rssMiB * 0.2);
    expect(s.revsPerEventsPct).toBeCloseTo(1.5);
    expect(s.usrCpuMs + s.sysCpuMs).toBeGreaterThan(0);
    expect(formatStats(s)).toMatch(/^stats: \d+ 200 3 \d+ \d+ \d+\.\d\d% \d+\.\dMiB 1\.50%$/);
  });
});

describe('before the first sync', () => {
  // Lists arrive in any order, object by object; nobody holds the state yet, so items are computed
  // when first read (once), except this node's own.
  const objects = () => [
    svc('web'), svc('api', { clusterIPs: ['10.96.0.9'] }), svc('gone', { clusterIPs: ['10.96.0.8'] }),
    slice('web-1', 'web', [ep('10.244.1.1', { node: 'n1' })]), slice('api-1', 'api', [ep('10.244.2.1', { node: 'n2' })]),
  ];

  test('shared items are not computed while the lists arrive; own ones are; the synced state is as computed at once', async () => {
    const store = new ClusterStore({ log: silentLogger });
    const state = new NodeState(store, 'n1');
    const shared = SharedItems.of(store);
    for (const o of objects()) { store.apply(o.kind as 'Service', o); store.flush(); }
    store.apply('Service', svc('gone'), true);
    store.apply('Service', svc('api', { clusterIPs: ['10.96.0.9'], ports: [{ name: 'http', protocol: 'TCP', port: 81, targetPort: 'http' }] }));
    store.flush();
    expect(shared.record('svc/default/api')!.generic).toBeUndefined();
    expect(state.isOwn('svc/default/web')).toBe(true); // its endpoint is on n1
    store.markSynced();
    const sub = state.subscribe();
    const first = await sub.next();
    expect(first.changes.map((x) => x.key)).toEqual(['node', 'svc/default/api', 'svc/default/web']);

    const once = cluster('n1', [...objects().filter((o) => (o.metadata as { name: string }).name !== 'gone'),
      svc('api', { clusterIPs: ['10.96.0.9'], ports: [{ name: 'http', protocol: 'TCP', port: 81, targetPort: 'http' }] })]);
    expect([...state.items()]).toEqual([...once.state.items()]);
  });
});

// The lab itself: namespaces, routes and echo servers work before any kpng rule is involved.
import { Lab, ADDR, PODS } from './lab/lab';
import { gated, need } from '../helpers/gate';

const d = gated(need.root()).describe;

d('nft lab harness', () => {
  let lab: Lab;
  beforeAll(async () => { lab = await Lab.create(); }, 60000);
  afterAll(async () => { await lab?.destroy(); });

  test('pods answer over TCP and UDP, v4 and v6, across nodes', async () => {
    const p2a = PODS.find((p) => p.name === 'p2a')!;
    for (const [proto, host] of [['tcp', p2a.v4], ['udp', p2a.v4], ['tcp', p2a.v6], ['udp', p2a.v6]] as const) {
      const [r] = await lab.probe(lab.ns.p1a, proto, host, 8080);
      expect(r).toMatchObject({ ok: true, name: 'p2a', peer: proto === 'tcp' && host === p2a.v4 ? '10.244.1.10' : expect.any(String) });
    }
    const [fromNode] = await lab.probe(lab.ns.n1, 'tcp', '10.244.1.11', 8081);
    expect(fromNode).toMatchObject({ ok: true, name: 'p1b', peer: ADDR.n1.gw4 });
  });

  test('the client reaches n1 and nothing else routes by itself', async () => {
    const [r] = await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 1, 1, 800);
    expect(r.ok).toBe(false);
    expect(r.err).toBe('ECONNREFUSED');
  });
});

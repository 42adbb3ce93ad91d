// etcd compacted to its current revision and defragmented while the churn goes on; 10 s later the API
// server is killed and started again, so that the proxy's watches resume from revisions etcd no longer
// has (410 Gone / "too old resource version") and it must list again. Compaction alone reaches no
// client: the API server's watch cache serves their watches, and its own etcd watch is current.
import { killApiServer, startApiServer } from '../apiserver';
import { now, sleep } from '../cluster';
import { catchUp, sliceFollowed } from '../marker';
import { secs } from '../report';
import { API_LOG, type Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

const ETCD = 'http://127.0.0.1:23790';

async function etcd(path: string, body: object): Promise<Record<string, unknown>> {
  const r = await fetch(`${ETCD}${path}`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
  const j = (await r.json()) as Record<string, unknown>;
  if (!r.ok) throw new Error(`etcd ${path}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}

export const etcdCompact: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'etcd-compact')!,
  logPattern: API_LOG,
  async run(ctx) {
    const faultAt = now();
    const head = await etcd('/v3/kv/range', { key: Buffer.from('/registry/').toString('base64'), limit: 1 });
    const revision = (head.header as { revision: string }).revision;
    await etcd('/v3/kv/compaction', { revision, physical: true });
    await etcd('/v3/maintenance/defragment', {});
    ctx.say(`etcd compacted to revision ${revision} and defragmented`);
    await sleep(10_000);
    const argv = await killApiServer(ctx.c);
    await sleep(2000);
    const restartAt = now();
    const readyAt = await startApiServer(ctx.c, argv);
    ctx.say(`kube-apiserver restarted, ready after ${secs(readyAt - restartAt)}`);
    const flip = await ctx.flipMarker();
    const nodes = ctx.c.plan.nodes.map((n) => n.name);
    return {
      faultAt,
      recoveredAt: readyAt,
      settleMs: 45_000,
      figures: [`compacted to revision ${revision}; API server restarted ${secs(restartAt - faultAt)} later, ready after ${secs(readyAt - restartAt)}`],
      after: async (events, to) => [`${catchUp(events, nodes, flip.pod, flip.at, to, 'marker moved once the API server was ready, served after')}; ${await sliceFollowed(flip)}`],
    };
  },
};

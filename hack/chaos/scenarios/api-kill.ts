// The API server killed (SIGKILL), down 10 s, started again. The data path should not notice; the
// proxy must reconnect by itself: the marker moved once the API server is ready shows when it did.
import { killApiServer, startApiServer } from '../apiserver';
import { now, sleep } from '../cluster';
import { catchUp, sliceFollowed } from '../marker';
import { API_LOG, type Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';
import { secs } from '../report';

export const apiKill: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'api-kill')!,
  logPattern: API_LOG,
  async run(ctx) {
    const faultAt = now();
    const argv = await killApiServer(ctx.c);
    ctx.say('kube-apiserver killed');
    await sleep(10_000);
    const restartAt = now();
    const readyAt = await startApiServer(ctx.c, argv);
    ctx.say(`kube-apiserver ready ${secs(readyAt - restartAt)} after its restart`);
    const flip = await ctx.flipMarker();
    const nodes = ctx.c.plan.nodes.map((n) => n.name);
    return {
      faultAt,
      recoveredAt: readyAt,
      settleMs: 45_000,
      figures: [`API server down ${secs(restartAt - faultAt)}, ready ${secs(readyAt - restartAt)} after its restart`],
      after: async (events, to) => [`${catchUp(events, nodes, flip.pod, flip.at, to, 'marker moved once the API server was ready, served after')}; ${await sliceFollowed(flip)}`],
    };
  },
};

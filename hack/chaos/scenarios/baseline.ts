// No fault: what the churn and the probes cost by themselves, and the marker's normal catch-up (the
// figure the API scenarios compare theirs with).
import { now, sleep } from '../cluster';
import { catchUp, sliceFollowed } from '../marker';
import type { Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

export const baseline: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'baseline')!,
  logPattern: /error|fail|warn/i,
  async run(ctx) {
    const faultAt = now();
    await sleep(ctx.short ? 10_000 : 20_000);
    const flip = await ctx.flipMarker();
    const nodes = ctx.c.plan.nodes.map((n) => n.name);
    return {
      faultAt,
      figures: [],
      settleMs: 15_000,
      after: async (events, to) => [`${catchUp(events, nodes, flip.pod, flip.at, to, 'marker moved, served after')}; ${await sliceFollowed(flip)}`],
    };
  },
};

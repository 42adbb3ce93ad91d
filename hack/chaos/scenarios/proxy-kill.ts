// The proxy's pod on kc-node1 deleted at once (--force --grace-period=0: its container killed, as an
// eviction or an OOM kill that takes the pod) every 30 s, 20 times (short mode: 3). The kernel keeps
// the last rules meanwhile; the DaemonSet's next pod must take over from them while the churn goes on.
import { kubectl, now, proxyPod, sleep, until } from '../cluster';
import { describeFailures, failureContexts, type Outage } from '../explain';
import { secs } from '../report';
import type { Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

const stats = (xs: number[]): string => {
  if (xs.length === 0) return 'none';
  const s = [...xs].sort((a, b) => a - b);
  return `median ${secs(s[Math.floor(s.length / 2)])}, max ${secs(s[s.length - 1])} (${xs.length})`;
};

export const proxyKill: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'proxy-kill')!,
  logPattern: /error|fail|warn|first sync|synced|listening|kernel state|left by/i,
  async run(ctx) {
    const rounds = ctx.short ? 3 : 20;
    const node = ctx.target.name;
    const readyAfter: number[] = [];
    const healthyAfter: number[] = [];
    const outages: Outage[] = [];
    let faultAt = 0;
    let lastReady = 0;
    for (let i = 0; i < rounds; i++) {
      const pod = await proxyPod(ctx.c, node);
      if (!pod) throw new Error(`round ${i + 1}: no proxy pod on ${node}`);
      const t = now();
      if (i === 0) faultAt = t;
      await kubectl(ctx.c, ['-n', 'kube-system', 'delete', 'pod', pod.name, '--force', '--grace-period=0', '--wait=false'], { allowFail: true });
      const ready = await until(async () => {
        const p = await proxyPod(ctx.c, node);
        return !!p && p.uid !== pod.uid && p.ready;
      }, 60_000, 250);
      if (ready !== undefined) { readyAfter.push(ready - t); lastReady = ready; }
      await sleep(t * 1000 + 30_000 - Date.now());
      // /healthz answering 200 again after the kill, from the runner's samples of this round.
      const h = ctx.outside.health.filter((s) => s.node === node && s.t > t + 0.5).sort((a, b) => a.t - b.t);
      const down = h.findIndex((s) => s.status !== 200);
      const up = down < 0 ? undefined : h.slice(down).find((s) => s.status === 200);
      if (up) healthyAfter.push(up.t - t);
      outages.push({ at: t, ...(up ? { back: up.t } : {}) });
      ctx.say(`round ${i + 1}/${rounds}: ${pod.name} deleted; next pod ready after ${ready === undefined ? 'never' : secs(ready - t)}`);
    }
    return {
      faultAt,
      recoveredAt: lastReady || now(),
      figures: [`${rounds} pods deleted; next pod Ready after ${stats(readyAfter)}`, `/healthz 200 again after ${stats(healthyAfter)}`],
      // Each failure beside the outages and the churn: whether it fits an endpoint lost while no proxy ran.
      after: (events) => describeFailures(failureContexts(events, outages, ctx.scales())),
    };
  },
};

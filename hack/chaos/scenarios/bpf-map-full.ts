// The eBPF backend's service map too small for the cluster: the DaemonSet rolled out with
// --ebpf-map-entries 24 (the chaos workload, kube-dns and `kubernetes` need about 40-60 entries, more
// as the churn scales up), 60 s of churn, then rolled back to the default. A service whose entries do
// not fit is left out of the maps whole and served by the nft part's DNAT (src/backend/ebpf/README.md);
// services move in and out of the maps as their endpoints come and go. Measured: connections that
// failed across the two rollouts and the overflow, and what kpng logged about it.
import { kubectl, now, proxyPod, sleep } from '../cluster';
import { secs } from '../report';
import type { Context, Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

const ENTRIES = 24;
const FLAG = `--ebpf-map-entries=${ENTRIES}`;
const HOLD_MS = 60_000;

async function args(ctx: Context): Promise<string[]> {
  const r = await kubectl(ctx.c, ['-n', 'kube-system', 'get', 'daemonset', 'kpng', '-o', 'jsonpath={.spec.template.spec.containers[0].args}']);
  return JSON.parse(r.stdout) as string[];
}

async function rollout(ctx: Context, patch: unknown[]): Promise<number> {
  const t = now();
  await kubectl(ctx.c, ['-n', 'kube-system', 'patch', 'daemonset', 'kpng', '--type=json', '-p', JSON.stringify(patch)]);
  await kubectl(ctx.c, ['-n', 'kube-system', 'rollout', 'status', 'daemonset/kpng', '--timeout=180s'], { timeoutMs: 200_000 });
  return now() - t;
}

export const bpfMapFull: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'bpf-map-full')!,
  logPattern: /map is full|ebpf-map-entries|E2BIG|replaced|error|fail|warn/i,
  async run(ctx) {
    if ((await args(ctx)).some((a) => a.startsWith('--ebpf-map-entries'))) throw new Error('the DaemonSet already sets --ebpf-map-entries');
    const faultAt = now();
    const rollIn = await rollout(ctx, [{ op: 'add', path: '/spec/template/spec/containers/0/args/-', value: FLAG }]);
    ctx.say(`kpng rolled out with ${FLAG} in ${secs(rollIn)}`);
    await sleep(HOLD_MS);
    // The overflow as the small-map pod said it (its log goes with it at the rollback).
    const pod = await proxyPod(ctx.c, ctx.target.name);
    const log = pod ? (await kubectl(ctx.c, ['-n', 'kube-system', 'logs', pod.name], { allowFail: true })).stdout.split('\n') : [];
    const full = log.filter((l) => /map is full|E2BIG/.test(l));
    const i = (await args(ctx)).indexOf(FLAG);
    const backAt = now();
    const rollOut = await rollout(ctx, [{ op: 'remove', path: `/spec/template/spec/containers/0/args/${i}` }]);
    ctx.say(`kpng rolled back to the default map size in ${secs(rollOut)}`);
    return {
      faultAt,
      recoveredAt: now(),
      settleMs: 20_000,
      figures: [
        `${ctx.target.name}'s pod logged the overflow ${full.length} times${full.length ? `; the last: ${full[full.length - 1].replace(/^.*\] /, '').slice(0, 300)}` : ''}`,
        `rollout with ${FLAG}: ${secs(rollIn)}; ${secs(HOLD_MS / 1000)} held; rollback ${secs(rollOut)} (begun ${secs(backAt - faultAt)} after the first)`,
      ],
    };
  },
};

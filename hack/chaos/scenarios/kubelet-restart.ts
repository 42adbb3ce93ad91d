// kc-node1's containerd and kubelet restarted (SIGTERM to both, as `systemctl restart containerd
// kubelet` does; the node's first process, hack/cluster/lib/node-init.sh, starts them again a second
// later). The containers run on under their shims: the proxy's pod should neither restart nor stop
// serving, and the data path should not notice. Measured: when both daemons were back, when the node
// was Ready again with a fresh heartbeat, and whether the proxy's pod is the same one, not restarted.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { kubectl, now, proxyPod, sleep, until } from '../cluster';
import { secs } from '../report';
import type { Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

/** "containerd kubelet" pids node-init.sh writes to <node dir>/pids. */
function daemons(dir: string): { containerd: number; kubelet: number } | undefined {
  try {
    const [containerd, kubelet] = fs.readFileSync(path.join(dir, 'pids'), 'utf8').trim().split(/\s+/).map(Number);
    return containerd > 0 && kubelet > 0 ? { containerd, kubelet } : undefined;
  } catch {
    return undefined;
  }
}

const alive = (pid: number): boolean => fs.existsSync(`/proc/${pid}`);

async function restarts(ctx: Parameters<Scenario['run']>[0], node: string): Promise<string> {
  const r = await kubectl(ctx.c, ['-n', 'kube-system', 'get', 'pods', '-l', 'k8s-app in (kpng,kube-proxy)', '--field-selector', `spec.nodeName=${node}`,
    '-o', 'jsonpath={range .items[*]}{.metadata.uid} {.status.containerStatuses[0].restartCount}{"\\n"}{end}'], { allowFail: true });
  return r.stdout.trim();
}

export const kubeletRestart: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'kubelet-restart')!,
  logPattern: /error|fail|warn|watch|lost|healthz|stopp|signal/i,
  async run(ctx) {
    const node = ctx.target.name;
    const before = daemons(ctx.target.dir);
    if (!before) throw new Error(`no daemon pids in ${ctx.target.dir}/pids (the node's launcher writes them)`);
    const pod = await proxyPod(ctx.c, node);
    const podBefore = await restarts(ctx, node);
    // node-init.sh before this scenario existed ended the node when a daemon exited: refuse rather than kill the node.
    const launcher = fs.readFileSync(path.join(ctx.c.state, 'pids', node), 'utf8').trim();
    const script = fs.readFileSync(`/proc/${launcher}/cmdline`, 'utf8').split('\0').find((a) => a.endsWith('node-init.sh'));
    if (!script || !fs.readFileSync(script, 'utf8').includes('start_kubelet')) throw new Error(`${node}'s launcher does not restart its daemons: restart the node with the current hack/cluster (make cluster-down; make cluster, or hack/cluster/reboot-node.sh ${node})`);
    const faultAt = now();
    process.kill(before.containerd, 'SIGTERM');
    process.kill(before.kubelet, 'SIGTERM');
    ctx.say(`${node}: containerd ${before.containerd} and kubelet ${before.kubelet} sent SIGTERM`);
    const back = await until(async () => {
      const d = daemons(ctx.target.dir);
      return !!d && d.containerd !== before.containerd && d.kubelet !== before.kubelet && alive(d.containerd) && alive(d.kubelet);
    }, 60_000, 200);
    // Ready with a heartbeat newer than the restart: the new kubelet reported.
    const ready = await until(async () => {
      const r = await kubectl(ctx.c, ['get', 'node', node, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}'], { allowFail: true, timeoutMs: 5000 });
      const [status, beat] = r.stdout.trim().split(' ');
      return status === 'True' && Date.parse(beat) / 1000 >= Math.floor(faultAt);
    }, 120_000, 500);
    await sleep(5000);
    const podAfter = await restarts(ctx, node);
    const same = podBefore !== '' && podAfter === podBefore;
    ctx.say(`${node}: daemons back after ${back === undefined ? 'never' : secs(back - faultAt)}, node Ready after ${ready === undefined ? 'never' : secs(ready - faultAt)}`);
    return {
      faultAt,
      recoveredAt: ready ?? back ?? now(),
      settleMs: 20_000,
      figures: [
        `containerd and kubelet running again ${back === undefined ? 'not within 60 s' : `${secs(back - faultAt)} after the SIGTERM`}`,
        `node Ready with a new heartbeat ${ready === undefined ? 'not within 120 s' : `${secs(ready - faultAt)} after it`}`,
        same ? `proxy pod ${pod?.name ?? '?'} the same, not restarted (uid and restart count unchanged)` : `proxy pod changed: before "${podBefore}", after "${podAfter}" (uid, restarts)`,
      ],
    };
  },
};

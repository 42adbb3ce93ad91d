// The API server unreachable for the proxy on kc-node1 only, for 2 minutes, while the
// churn goes on and the marker moves: nftables rules in the node's namespace drop the API server's
// traffic to and from sockets of the node's pods (`socket cgroupv2`, the node's kubepods cgroup, so a
// proxy container restarted meanwhile is cut off too); the kubelet and containerd, outside kubepods,
// keep the API server, so the node stays Ready and the churn goes on. When the rules go, the proxy
// must catch up: the marker tells when kc-node1 had the change made during the outage.
import * as fs from 'node:fs';
import { inNode, now, run, sleep } from '../cluster';
import { catchUp, sliceFollowed } from '../marker';
import { markerSeen } from '../probes';
import { secs } from '../report';
import { API_LOG, type Context, type Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

const TABLE = 'kpng-chaos';

/** The proxy's process on the node (kpng or kube-proxy: both get --hostname-override=<node>). */
async function proxyPid(node: string): Promise<number> {
  const r = await run('pgrep', ['-f', '--', `--hostname-override=${node}`], { allowFail: true });
  const pids = r.stdout.split('\n').filter(Boolean).map(Number);
  for (const pid of pids) {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmd.includes('--init-only')) return pid;
  }
  throw new Error(`no proxy process with --hostname-override=${node}`);
}

/** The kubepods cgroup (v2) the proxy runs under, as nft's `socket cgroupv2` takes it: a path under /sys/fs/cgroup and its level. */
async function podsCgroup(ctx: Context): Promise<{ path: string; level: number }> {
  const pid = await proxyPid(ctx.target.name);
  const line = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').find((l) => l.startsWith('0::'));
  const parts = (line?.slice(3) ?? '').split('/').filter(Boolean);
  if (parts.length < 3 || `/${parts[0]}` !== ctx.target.cgroupRoot) throw new Error(`proxy pid ${pid}: cgroup v2 ${line} is not under ${ctx.target.cgroupRoot}/<pods>`);
  const mount = fs.readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')).find((f) => f[2] === 'cgroup2')?.[1];
  if (!mount?.startsWith('/sys/fs/cgroup')) throw new Error(`no cgroup2 mount under /sys/fs/cgroup (${mount})`);
  const prefix = mount.slice('/sys/fs/cgroup'.length).replace(/^\//, '');
  return { path: [prefix, parts[0], parts[1]].filter(Boolean).join('/'), level: 2 };
}

export const apiPartition: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'api-partition')!,
  logPattern: API_LOG,
  async run(ctx) {
    const cg = await podsCgroup(ctx);
    const api = ctx.c.plan.bridgeIP;
    const port = ctx.c.plan.apiServerPort;
    const match = `socket cgroupv2 level ${cg.level} "${cg.path}"`;
    const rules = `table inet ${TABLE} {
  chain out { type filter hook output priority -10; ip daddr ${api} tcp dport ${port} ${match} counter drop; }
  chain in { type filter hook input priority -10; ip saddr ${api} tcp sport ${port} ${match} counter drop; }
}
`;
    const ns = ctx.target.netns;
    const blockMs = 120_000;
    await inNode(ns, ['nft', 'delete', 'table', 'inet', TABLE], { allowFail: true });
    const faultAt = now();
    await inNode(ns, ['nft', '-f', '-'], { input: rules });
    ctx.say(`API server cut off from ${ctx.target.name}'s pods (${cg.path}) for ${blockMs / 1000} s`);
    await sleep(blockMs / 4);
    const flip = await ctx.flipMarker();
    ctx.say(`marker moved to ${flip.pod} during the outage`);
    await sleep(faultAt * 1000 + blockMs - Date.now());
    const counters = (await inNode(ns, ['nft', 'list', 'table', 'inet', TABLE])).stdout;
    const recoveredAt = now();
    await inNode(ns, ['nft', 'delete', 'table', 'inet', TABLE]);
    ctx.say('API server reachable again');
    const dropped = [...counters.matchAll(/counter packets (\d+)/g)].map((m) => Number(m[1]));
    const nodes = ctx.c.plan.nodes.map((n) => n.name);
    const others = nodes.filter((n) => n !== ctx.target.name);
    return {
      faultAt,
      recoveredAt,
      settleMs: 45_000,
      figures: [`cut off ${secs(recoveredAt - faultAt)}; packets dropped: ${dropped[0] ?? '?'} to the API server, ${dropped[1] ?? '?'} from it`],
      after: async (events, to) => {
        const early = markerSeen(events, ctx.target.name, flip.pod, flip.at, recoveredAt);
        return [
          `${catchUp(events, others, flip.pod, flip.at, to, 'marker moved during the outage, served on the other nodes after')}; ${await sliceFollowed(flip)}`,
          early !== undefined
            ? `${ctx.target.name} served the moved marker during the outage (+${secs(early)}): the cut did not hold`
            : catchUp(events, [ctx.target.name], flip.pod, recoveredAt, to, 'catch-up: the moved marker served on the cut-off node after the API server came back'),
        ];
      },
    };
  },
};

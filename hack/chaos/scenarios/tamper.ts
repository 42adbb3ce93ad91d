// Another program wipes the proxy's rules on kc-node1: the whole ruleset (`nft flush ruleset`, as a
// careless firewall reload does) or the proxy's own tables (`nft delete table`). Measured two ways:
// `nft monitor` in the node says when the proxy's table was deleted and when it was back, and a
// connection every 20 ms from the host to the node's NodePort says when services answered again.
import { spawn } from 'node:child_process';
import { inNode, now, sleep } from '../cluster';
import { firstEchoAfter } from '../outside';
import { secs } from '../report';
import type { Context, Fault, Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

// (kpng-chaos is api-partition's own table, never the proxy's.)
const PROXY_TABLE = /^table (\S+) (kpng(?!-chaos)\S*|kube-proxy)$/;
export const TAMPER_LOG = /tamper|lost|repair|another process|deleted|flush|full sync|kernel state|changed by/i;

/** The proxy's tables in the node ("ip kpng", "ip6 kube-proxy", ...). */
async function proxyTables(netns: string): Promise<string[]> {
  const out = (await inNode(netns, ['nft', 'list', 'tables'])).stdout;
  return out.split('\n').map((l) => PROXY_TABLE.exec(l.trim())).filter((m): m is RegExpExecArray => !!m).map((m) => `${m[1]} ${m[2]}`);
}

async function tamper(ctx: Context, how: 'flush' | 'table'): Promise<Fault> {
  const ns = ctx.target.netns;
  const tables = await proxyTables(ns);
  if (tables.length === 0) throw new Error(`no table of the proxy in ${ns}`);
  // The monitor's lines, stamped as they arrive.
  const seen: { t: number; line: string }[] = [];
  const mon = spawn('nsenter', [`--net=/run/netns/${ns}`, '--', 'nft', 'monitor', 'tables'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let buf = '';
  mon.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) { seen.push({ t: now(), line: buf.slice(0, i).trim() }); buf = buf.slice(i + 1); }
  });
  await sleep(1000);
  const faultAt = now();
  if (how === 'flush') await inNode(ns, ['nft', 'flush', 'ruleset']);
  else for (const t of tables) await inNode(ns, ['nft', 'delete', 'table', ...t.split(' ')]);
  const doneAt = now();
  ctx.say(`${how === 'flush' ? 'ruleset flushed' : `deleted ${tables.join(', ')}`} in ${ns} (${secs(doneAt - faultAt)})`);
  const answered = await firstEchoAfter(ctx.target.ip, ctx.nodePort, 120_000);
  // Wait for every table to be back (at most 2 minutes after the tampering), then stop the monitor.
  const back = (t: string) => seen.find((s) => s.line === `add table ${t}` && s.t >= faultAt);
  while (now() < faultAt + 120 && !tables.every(back)) await sleep(100);
  mon.kill();
  const deleted = seen.find((s) => s.line.startsWith('delete table') && tables.some((t) => s.line === `delete table ${t}`));
  const figures = [
    answered === undefined ? 'NodePort never answered again within 120 s' : `NodePort answered again ${secs(answered - doneAt)} after the tampering command returned (polled every 20 ms)`,
    ...tables.map((t) => {
      const b = back(t);
      return b ? `table ${t} re-created ${secs(b.t - (deleted?.t ?? faultAt))} after its deletion (nft monitor)` : `table ${t} not re-created within 120 s`;
    }),
  ];
  return { faultAt, recoveredAt: answered, figures, settleMs: 15_000 };
}

export const tamperFlush: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'tamper-flush')!,
  logPattern: TAMPER_LOG,
  run: (ctx) => tamper(ctx, 'flush'),
};

export const tamperTable: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'tamper-table')!,
  logPattern: TAMPER_LOG,
  run: (ctx) => tamper(ctx, 'table'),
};

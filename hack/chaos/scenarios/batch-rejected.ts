// The kernel refuses the proxy's nftables batches on kc-node1 for 20 s. An honest way to get a real
// refusal on a real node: another process takes the proxy's IPv4 table name with an owned table
// (`flags owner`: only the netlink socket that made it may change or delete it; the kernel deletes it
// when that socket closes). `nft -i` holds the socket: one transaction deletes the proxy's table and
// adds the owned, empty one. Every batch the proxy sends for that table is then refused (EPERM) and
// IPv4 services of the node have no rules; when nft exits the owned table goes and the proxy can
// repair. Measured: the NodePort answering again after the release (polled every 20 ms), and what
// the proxy logged and counted meanwhile.
import { spawn } from 'node:child_process';
import { inNode, now, sleep } from '../cluster';
import { firstEchoAfter } from '../outside';
import { secs } from '../report';
import type { Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';
import { TAMPER_LOG } from './tamper';

const HOLD_MS = 20_000;

export const batchRejected: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'batch-rejected')!,
  logPattern: new RegExp(`${TAMPER_LOG.source}|reject|EPERM|not permitted|refused|unhealthy`, 'i'),
  async run(ctx) {
    const ns = ctx.target.netns;
    const tables = (await inNode(ns, ['nft', 'list', 'tables'])).stdout.split('\n').map((l) => /^table ip (kpng|kube-proxy)$/.exec(l.trim())?.[1]).filter(Boolean);
    const table = tables[0];
    if (!table) throw new Error(`no IPv4 table of the proxy in ${ns}`);
    const nft = spawn('nsenter', [`--net=/run/netns/${ns}`, '--', 'nft', '-i'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let said = '';
    nft.stdout.on('data', (d: Buffer) => { said += d.toString(); });
    nft.stderr.on('data', (d: Buffer) => { said += d.toString(); });
    const faultAt = now();
    // One line, one transaction: the proxy never sees its table missing without the owned one in its place.
    nft.stdin.write(`delete table ip ${table}; add table ip ${table} { flags owner; }\n`);
    await sleep(1000);
    const held = (await inNode(ns, ['nft', 'list', 'table', 'ip', table], { allowFail: true })).stdout;
    const owned = /flags owner/.test(held);
    ctx.say(`table ip ${table} in ${ns} ${owned ? 'taken by an owned table (nft -i)' : `not taken: ${said.trim().slice(0, 200)}`}`);
    await sleep(HOLD_MS - 1000);
    const releasedAt = now();
    nft.stdin.end();
    await new Promise<void>((r) => { nft.on('exit', () => r()); setTimeout(r, 5000); });
    const answered = await firstEchoAfter(ctx.target.ip, ctx.nodePort, 120_000);
    return {
      faultAt,
      recoveredAt: answered ?? now(),
      settleMs: 15_000,
      figures: [
        owned ? `table ip ${table} held by another process's owned table for ${secs(releasedAt - faultAt)}` : `the owned table could not be made: ${said.trim().slice(0, 200)}`,
        answered === undefined ? 'NodePort not answering within 120 s of the release' : `NodePort answered again ${secs(answered - releasedAt)} after the release`,
      ],
    };
  },
};

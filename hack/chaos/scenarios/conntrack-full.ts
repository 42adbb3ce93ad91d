// kc-node1's conntrack table full for 30 s. nf_conntrack_max is one setting for the whole machine
// (read-only in any other network namespace) while the count is per namespace: the limit is lowered
// on the host to a value far above what any other namespace holds (the other node, other sessions'
// test namespaces), and a UDP flood inside kc-node1 (datagrams to ever new 127.x.y.z addresses, each
// an unreplied entry for 30 s) fills that node's table up to it. Then the flood stops and the limit is
// restored. The kernel's own counters (`conntrack -S`: drop, early_drop, insert_failed) say what it
// refused. A proxy cannot prevent this; the scenario shows what each says and how soon services are back.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inNode, now, sleep } from '../cluster';
import { secs } from '../report';
import type { Scenario } from '../scenario';
import { SCENARIOS } from '../scenario-list';

const MAX = '/proc/sys/net/netfilter/nf_conntrack_max';
const FULL_MS = 30_000;

/** The floor of the lowered limit: what kc-node1 can reach with its flood in seconds, far above the other namespaces. */
const LIMIT_FLOOR = 16384;

async function count(netns: string): Promise<number> {
  const r = await inNode(netns, ['cat', '/proc/sys/net/netfilter/nf_conntrack_count'], { allowFail: true });
  return Number(r.stdout.trim()) || 0;
}

/** `conntrack -S` summed over CPUs: drop, early_drop, insert_failed... */
async function stats(netns: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const r = await inNode(netns, ['conntrack', '-S'], { allowFail: true });
  for (const m of r.stdout.matchAll(/(\w+)=(\d+)/g)) if (m[1] !== 'cpu') out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[2]));
  return out;
}

const FLOOD = `const d = require('dgram').createSocket('udp4'); d.on('error', () => {}); let i = 0;
setInterval(() => { for (let k = 0; k < 60; k++) { i++; d.send('x', 9, '127.' + (1 + ((i >> 16) & 63)) + '.' + ((i >> 8) & 255) + '.' + (i & 255), () => {}); } }, 10);`;

export const conntrackFull: Scenario = {
  info: SCENARIOS.find((s) => s.name === 'conntrack-full')!,
  logPattern: /conntrack|error|fail|warn/i,
  async run(ctx) {
    const ns = ctx.target.netns;
    const orig = fs.readFileSync(MAX, 'utf8').trim();
    const others: number[] = [];
    for (const name of fs.readdirSync('/run/netns')) if (name !== ns) others.push(await count(name));
    const limit = Math.max(LIMIT_FLOOR, 4 * Math.max(0, ...others));
    // Where to find the original should this process die before it restores it.
    const note = path.join(ctx.c.state, 'chaos-nf_conntrack_max');
    fs.writeFileSync(note, `${orig}\n`);
    const s0 = await stats(ns);
    const faultAt = now();
    fs.writeFileSync(MAX, String(limit));
    const flood = spawn('nsenter', [`--net=/run/netns/${ns}`, '--', process.execPath, '-e', FLOOD], { stdio: 'ignore' });
    let fullAt: number | undefined;
    let peak = 0;
    try {
      ctx.say(`nf_conntrack_max ${orig} -> ${limit} (other namespaces hold at most ${Math.max(0, ...others)}); flooding ${ns}`);
      const end = Date.now() + FULL_MS;
      while (Date.now() < end) {
        const n = await count(ns);
        peak = Math.max(peak, n);
        if (fullAt === undefined && n >= limit) fullAt = now();
        await sleep(500);
      }
    } finally {
      flood.kill();
      fs.writeFileSync(MAX, orig);
      fs.rmSync(note, { force: true });
    }
    const restoredAt = now();
    const s1 = await stats(ns);
    const delta = ['drop', 'early_drop', 'insert_failed', 'invalid'].map((k) => `${k} +${(s1.get(k) ?? 0) - (s0.get(k) ?? 0)}`).join(', ');
    ctx.say(`limit restored to ${orig}; ${delta}`);
    return {
      faultAt,
      recoveredAt: restoredAt,
      settleMs: 20_000,
      figures: [
        `nf_conntrack_max lowered to ${limit} for ${secs(restoredAt - faultAt)}; ${ns}'s table ${fullAt === undefined ? `never full (peak ${peak})` : `full ${secs(fullAt - faultAt)} after the flood began (peak ${peak})`}`,
        `kernel counters in ${ns} (conntrack -S): ${delta}`,
      ],
    };
  },
};

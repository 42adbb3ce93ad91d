// Micro benchmark: the native addon vs `nft -f` for the same objects, in a throwaway netns. Each
// side is timed from the same description to the kernel's answer: the verdict map from the element
// numbers (addon: building and encoding its batch; nft -f: rendering the text, then nft), the rules
// from ops and from text made in advance.
// Prints figures only (never pass/fail). Needs root, iproute2, nft and the built addon.
//   npx tsc -p tsconfig.json && node dist/bench/native-nft.bench.js [elements...]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { NftBatch, concat, ipv4, nftApply, port, proto, type NftOp } from '../src/native/index';
import { nftList } from '../test/helpers/nft-list';
import { NetLab } from '../test/shared/netlab';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const lab = new NetLab('kpng-bench');
const ns = lab.name('ns');
const nsPath = `/var/run/netns/${ns}`;

function keyOf(i: number): Uint8Array {
  return concat(ipv4(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`), proto('tcp'), port(80));
}
function ipOf(i: number): string { return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`; }

/** Writes the file and runs `nft -f` on it: ms of both. */
function nftFile(text: string): number {
  const f = path.join(os.tmpdir(), `kpng-bench-${process.pid}.nft`);
  const t0 = performance.now();
  fs.writeFileSync(f, text);
  execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', f]);
  const ms = performance.now() - t0;
  fs.unlinkSync(f);
  return ms;
}

const base = (table: string): NftOp[] => [
  { op: 'add', table: { family: 'ip', name: table } },
  { op: 'add', chain: { family: 'ip', table, name: 'target' } },
  { op: 'add', set: { family: 'ip', table, name: 'svcmap', keyType: ['ipv4_addr', 'inet_proto', 'inet_service'], dataType: 'verdict' } },
];

async function benchMap(n: number): Promise<void> {
  await nftApply(base('addon'), { netns: nsPath });
  const t0 = performance.now();
  const b = new NftBatch();
  b.beginElements('add', { family: 'ip', table: 'addon', set: 'svcmap' });
  for (let i = 0; i < n; i++) b.element({ key: keyOf(i), verdict: { goto: 'target' } });
  const r = await nftApply(b, { netns: nsPath });
  const total = performance.now() - t0;
  // Element dumps are quadratic in the kernel (each dump round re-walks the set): list only up to 100k.
  let listNote = '';
  if (n <= 100_000) {
    const tl = performance.now();
    const listed = (await nftList('ip', 'addon', { netns: nsPath })).sets[0].elements.length;
    listNote = `; list back ${listed} in ${(performance.now() - tl).toFixed(1)} ms`;
  }
  console.log(`verdict map, ${n} elements:`);
  console.log(`  addon : ${total.toFixed(1)} ms total (JS build+encode ${(total - r.ms).toFixed(1)} ms, worker ${r.ms.toFixed(1)} ms), ` +
    `${r.messages} netlink messages, ${(r.bytes / 1024).toFixed(0)} KiB${listNote}`);
  if (n > 200_000) {
    await nftApply([{ op: 'delete', table: { family: 'ip', name: 'addon' } }], { netns: nsPath });
    return;
  }

  const lines = ['table ip nftf {', ' chain target {', ' }',
    ' map svcmap {', '  type ipv4_addr . inet_proto . inet_service : verdict', ' }', '}'];
  const setup = lines.join('\n') + '\n';
  nftFile(setup);
  const tr = performance.now();
  const el: string[] = [];
  for (let i = 0; i < n; i++) el.push(`${ipOf(i)} . tcp . 80 : goto target`);
  const text = `add element ip nftf svcmap { ${el.join(',\n')} }\n`;
  const renderMs = performance.now() - tr;
  const nftMs = renderMs + nftFile(text);
  let nftList2 = '';
  if (n <= 100_000) {
    const t2 = performance.now();
    const out = execFileSync('ip', ['netns', 'exec', ns, 'nft', 'list', 'map', 'ip', 'nftf', 'svcmap'], { maxBuffer: 1 << 30 });
    nftList2 = `; nft list map ${(performance.now() - t2).toFixed(1)} ms (${out.length} bytes)`;
  }
  console.log(`  nft -f: ${nftMs.toFixed(1)} ms total (JS text ${renderMs.toFixed(1)} ms, file + nft -f ${(nftMs - renderMs).toFixed(1)} ms)${nftList2}`);
  await nftApply([{ op: 'delete', table: { family: 'ip', name: 'addon' } }, { op: 'delete', table: { family: 'ip', name: 'nftf' } }], { netns: nsPath });
}

async function benchRules(n: number): Promise<void> {
  // one chain + one DNAT rule per endpoint, like kube-proxy's endpoint chains
  const ops: NftOp[] = [{ op: 'add', table: { family: 'ip', name: 'addon' } }];
  for (let i = 0; i < n; i++) ops.push({ op: 'add', chain: { family: 'ip', table: 'addon', name: `ep-${i}` } });
  for (let i = 0; i < n; i++) {
    ops.push({
      op: 'add', rule: {
        family: 'ip', table: 'addon', chain: `ep-${i}`, comment: `ns/svc-${i}:http`,
        exprs: [
          { type: 'meta', key: 'l4proto', dreg: 1 }, { type: 'cmp', sreg: 1, op: 'eq', data: proto('tcp') },
          { type: 'immediate', dreg: 1, data: ipv4(ipOf(i)) }, { type: 'immediate', dreg: 2, data: port(8080) },
          { type: 'nat', nat: 'dnat', family: 'ip', regAddrMin: 1, regProtoMin: 2 },
        ],
      },
    });
  }
  const t0 = performance.now();
  const r = await nftApply(ops, { netns: nsPath });
  const total = performance.now() - t0;
  const text: string[] = ['table ip nftf {'];
  for (let i = 0; i < n; i++) text.push(` chain ep-${i} {`, `  meta l4proto tcp dnat to ${ipOf(i)}:8080 comment "ns/svc-${i}:http"`, ' }');
  text.push('}');
  const nftMs = nftFile(text.join('\n') + '\n');
  console.log(`${n} chains + ${n} DNAT rules:`);
  console.log(`  addon : ${total.toFixed(1)} ms total (encode ${r.encodeMs.toFixed(1)} ms, worker ${r.ms.toFixed(1)} ms), ` +
    `${r.messages} netlink messages, ${(r.bytes / 1024).toFixed(0)} KiB`);
  console.log(`  nft -f: ${nftMs.toFixed(1)} ms`);
  await nftApply([{ op: 'delete', table: { family: 'ip', name: 'addon' } }, { op: 'delete', table: { family: 'ip', name: 'nftf' } }], { netns: nsPath });
}

async function main(): Promise<void> {
  const sizes = process.argv.slice(2).map(Number).filter((x) => x > 0);
  lab.netns('ns');
  try {
    for (const n of sizes.length ? sizes : [10_000, 100_000]) await benchMap(n);
    await benchRules(10_000);
  } finally {
    lab.destroy();
  }
}

main().catch((e) => { console.error(e); process.exitCode = 1; });

// Listing nftables tables and decoding rules back into NftExpr shapes: used by tests to check what the
// kernel holds (product code never lists sets: it keeps its own model). Tables through the product
// addon, one table's full listing through the test addon (test-native.ts).
import {
  loadNative, nsArg, NFPROTO,
  type NativeCallOptions, type NftChainInfo, type NftElementInfo, type NftFamily, type NftRuleInfo, type NftSetInfo,
  type NftExpr, type NftTableInfo, type NftTableListing, type NftVerdict, type RawTable,
} from '../../src/native';
import { CMP_OP, CT_KEY, EXPR_ATTRS, META_KEY, PAYLOAD_BASE, VERDICT } from '../../src/native/encode';
import { loadTestNative } from './test-native';

const FAMILY_BY_NUM: Record<number, NftFamily> = Object.fromEntries(
  Object.entries(NFPROTO).map(([k, v]) => [v, k as NftFamily])) as Record<number, NftFamily>;
const HOOK_NAMES = ['prerouting', 'input', 'forward', 'output', 'postrouting'] as const;

function tableInfo(t: RawTable): NftTableInfo {
  return { family: FAMILY_BY_NUM[t.family], name: t.name, handle: t.handle, flags: t.flags, ...(t.comment ? { comment: t.comment } : {}) };
}

export async function nftListTables(opts?: NativeCallOptions): Promise<NftTableInfo[]> {
  return (await loadNative().nftListTables(nsArg(opts))).map(tableInfo);
}

/** Lists one table: chains, sets/maps (with elements unless elements=false), rules with handles. */
export async function nftList(family: NftFamily, table: string, opts?: NativeCallOptions & { elements?: boolean }):
  Promise<NftTableListing> {
  const raw = await loadTestNative().nftList(NFPROTO[family], table, opts?.elements ?? true, nsArg(opts));
  const chains: NftChainInfo[] = raw.chains.map((c) => ({
    family: FAMILY_BY_NUM[c.family], table: c.table, name: c.name, handle: c.handle,
    ...(c.hooknum !== undefined ? {
      hook: (family === 'netdev' ? 'ingress' : HOOK_NAMES[c.hooknum]), type: c.type as NftChainInfo['type'],
      priority: c.priority,
    } : {}),
    ...(c.policy !== undefined ? { policy: c.policy === 1 ? 'accept' : 'drop' } as const : {}),
    ...(c.device ? { device: c.device } : {}),
    ...(c.comment ? { comment: c.comment } : {}),
  }));
  const sets: NftSetInfo[] = raw.sets.map((s) => ({
    ...s, family: FAMILY_BY_NUM[s.family],
    elements: s.elements.map((e) => {
      const out: NftElementInfo = { key: e.key };
      if (e.keyEnd) out.keyEnd = e.keyEnd;
      if (e.data) out.data = e.data;
      if (e.verdictCode !== undefined) out.verdict = verdictFromCode(e.verdictCode, e.chain);
      if (e.flags && (e.flags & 1)) out.intervalEnd = true;
      if (e.timeout) out.timeout = e.timeout;
      if (e.expires) out.expires = e.expires;
      if (e.comment) out.comment = e.comment;
      return out;
    }),
  }));
  const rules: NftRuleInfo[] = raw.rules.map((r) => ({
    family: FAMILY_BY_NUM[r.family], table: r.table, chain: r.chain, handle: r.handle,
    ...(r.comment ? { comment: r.comment } : {}),
    exprs: r.exprs.map((x) => decodeExpr(x.name, x.attrs)),
  }));
  return { table: tableInfo(raw.table), chains, sets, rules };
}

/** NF_NAT_RANGE_* bits: a map of addresses and a port follow from the registers; random, persistent and
 * fully-random change the choice of source port, so they are kept; any other bit (an offset, netmap)
 * gives null: the expression stays raw rather than be listed as something it is not. */
const NAT_RANGE = { mapIps: 1, protoSpecified: 2, random: 4, persistent: 8, fullyRandom: 16 } as const;
function natFlags(bits: number | undefined): { random?: boolean; persistent?: boolean; fullyRandom?: boolean } | undefined | null {
  if (!bits) return undefined;
  if (bits & ~0x1f) return null;
  const out: { random?: boolean; persistent?: boolean; fullyRandom?: boolean } = {};
  if (bits & NAT_RANGE.random) out.random = true;
  if (bits & NAT_RANGE.persistent) out.persistent = true;
  if (bits & NAT_RANGE.fullyRandom) out.fullyRandom = true;
  return Object.keys(out).length ? out : undefined;
}

function verdictFromCode(code: number, chain?: string): NftVerdict {
  if (code === VERDICT.jump) return { jump: chain ?? '' };
  if (code === VERDICT.goto) return { goto: chain ?? '' };
  const name = (Object.keys(VERDICT) as (keyof typeof VERDICT)[]).find((k) => VERDICT[k] === code);
  return (name === 'break' || !name ? 'continue' : name) as NftVerdict;
}

const rev = <T extends Record<string, number>>(m: T) =>
  Object.fromEntries(Object.entries(m).map(([k, v]) => [v, k])) as Record<number, keyof T>;
const PAYLOAD_BASE_R = rev(PAYLOAD_BASE), CMP_OP_R = rev(CMP_OP), META_KEY_R = rev(META_KEY), CT_KEY_R = rev(CT_KEY);

/** Decodes a listed expression back into the NftExpr shape (best effort; unknown ones stay raw). */
function decodeExpr(name: string, attrs: Record<number, Uint8Array>): NftRuleInfo['exprs'][number] {
  const table = EXPR_ATTRS[name];
  if (!table) return { type: name, raw: attrs };
  const f: Record<string, number | string | Uint8Array> = {};
  for (const [field, [id, w]] of Object.entries(table)) {
    const b = attrs[id];
    if (!b) continue;
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    switch (w) {
      case 'u8': f[field] = b[0]; break;
      case 'u16': f[field] = dv.getUint16(0, true); break;
      case 'u32': f[field] = b.length >= 4 ? dv.getInt32(0, true) : b[0]; break;
      case 'u64': f[field] = Number(dv.getBigUint64(0, true)); break;
      case 'str': f[field] = Buffer.from(b).toString('utf8').replace(/\0.*$/s, ''); break;
      case 'bytes': f[field] = new Uint8Array(b); break;
    }
  }
  const n = (k: string) => f[k] as number;
  switch (name) {
    case 'payload': return { type: 'payload', base: PAYLOAD_BASE_R[n('base')], offset: n('offset'), len: n('len'), dreg: n('dreg') };
    case 'meta': return f.dreg !== undefined ? { type: 'meta', key: META_KEY_R[n('key')], dreg: n('dreg') }
      : { type: 'metaSet', key: META_KEY_R[n('key')], sreg: n('sreg') };
    case 'cmp': return { type: 'cmp', sreg: n('sreg'), op: CMP_OP_R[n('op')], data: f.data as Uint8Array };
    case 'range': return { type: 'range', sreg: n('sreg'), op: CMP_OP_R[n('op')] as 'eq' | 'neq', from: f.from as Uint8Array, to: f.to as Uint8Array };
    case 'bitwise': return { type: 'bitwise', sreg: n('sreg'), dreg: n('dreg'), len: n('len'), mask: f.mask as Uint8Array, xor: f.xor as Uint8Array };
    case 'lookup': return {
      type: 'lookup', sreg: n('sreg'), set: f.set as string,
      ...(f.dreg !== undefined ? { dreg: n('dreg') } : {}), ...(n('flags') & 1 ? { invert: true } : {}),
    };
    case 'immediate':
      if (n('dreg') === 0 && f.verdict !== undefined) return { type: 'verdict', verdict: verdictFromCode(n('verdict'), f.chain as string) };
      return { type: 'immediate', dreg: n('dreg'), data: f.data as Uint8Array };
    case 'numgen': return { type: 'numgen', mode: n('mode') === 1 ? 'random' : 'inc', mod: n('mod'), offset: n('offset') ?? 0, dreg: n('dreg') };
    case 'ct': return f.dreg !== undefined
      ? { type: 'ct', key: CT_KEY_R[n('key')], dreg: n('dreg'), ...(f.dir !== undefined ? { dir: n('dir') === 1 ? 'reply' : 'original' } : {}) } as NftExpr
      : { type: 'ctSet', key: CT_KEY_R[n('key')] as 'mark', sreg: n('sreg') };
    case 'nat': {
      const flags = natFlags(f.flags as number | undefined);
      if (flags === null) return { type: name, raw: attrs };
      return {
        type: 'nat', nat: n('nat') === 1 ? 'dnat' : 'snat', family: n('family') === NFPROTO.ip6 ? 'ip6' : 'ip',
        ...(f.regAddrMin !== undefined ? { regAddrMin: n('regAddrMin') } : {}), ...(f.regAddrMax !== undefined ? { regAddrMax: n('regAddrMax') } : {}),
        ...(f.regProtoMin !== undefined ? { regProtoMin: n('regProtoMin') } : {}), ...(f.regProtoMax !== undefined ? { regProtoMax: n('regProtoMax') } : {}),
        ...(flags ? { flags } : {}),
      };
    }
    case 'masq': {
      const flags = natFlags(f.flags as number | undefined);
      if (flags === null) return { type: name, raw: attrs };
      return { type: 'masq', ...(f.regProtoMin !== undefined ? { regProtoMin: n('regProtoMin') } : {}), ...(flags ? { flags } : {}) };
    }
    case 'reject': return { type: 'reject', reject: (['icmp', 'tcpReset', 'icmpx'] as const)[n('reject')], code: n('code') };
    case 'counter': return { type: 'counter', packets: n('packets'), bytes: n('bytes') };
    case 'dynset': return {
      type: 'dynset', op: (['add', 'update', 'delete'] as const)[n('op')], set: f.set as string, sregKey: n('sregKey'),
      ...(f.sregData !== undefined ? { sregData: n('sregData') } : {}), ...(f.timeout !== undefined ? { timeout: n('timeout') } : {}),
    };
    case 'fib': {
      const flags = (['saddr', 'daddr', 'mark', 'iif', 'oif', 'present'] as const).filter((_, i) => n('flags') & (1 << i));
      return { type: 'fib', flags: [...flags], result: (['', 'oif', 'oifname', 'addrtype'] as const)[n('result')] as 'oif', dreg: n('dreg') };
    }
    case 'log': return { type: 'log', ...(f.prefix !== undefined ? { prefix: f.prefix as string } : {}), ...(f.group !== undefined ? { group: n('group') } : {}) };
    case 'notrack': return { type: 'notrack' };
    default: return { type: name, raw: attrs };
  }
}


// Listing nftables tables and decoding rules back into NftExpr shapes: used by tests to check what the
// kernel holds (product code never lists sets: it keeps its own model). Tables through the product
// addon, one table's full listing through the test addon (test-native.ts).
// Its constants come from the installed C headers (nf-tables-uapi.ts), none from src: a wrong constant
// of the product's encoder then shows as a difference with the kernel, not as the same mistake twice.
import {
  loadNative, nsArg,
  type NativeCallOptions, type NftChainInfo, type NftElementInfo, type NftFamily, type NftRuleInfo, type NftSetInfo,
  type NftExpr, type NftTableInfo, type NftTableListing, type NftVerdict, type RawTable,
} from '../../src/native';
import { loadTestNative } from './test-native';
import { uapi, uapiEnum } from './nf-tables-uapi';

type MetaKey = Extract<NftExpr, { type: 'meta' }>['key'];

/** How an attribute's bytes are read. */
export type AttrWidth = 'u8' | 'u16' | 'u32' | 'u64' | 'str' | 'bytes';

/** "field SUFFIX width, ..." -> field -> [PREFIX + SUFFIX, width]. */
function listed(prefix: string, spec: string): Record<string, [string, AttrWidth]> {
  return Object.fromEntries(spec.split(', ').map((f) => {
    const [field, suffix, width] = f.split(' ');
    return [field!, [prefix + suffix!, width as AttrWidth]];
  }));
}

/**
 * The attributes the decoder reads of each expression: the libnftnl id it is listed under (named as in
 * libnftnl/expr.h: the listing comes from libnftnl's getters) and its width.
 */
export const LISTED_ATTRS: Record<string, Record<string, [string, AttrWidth]>> = {
  payload: listed('NFTNL_EXPR_PAYLOAD_', 'dreg DREG u32, base BASE u32, offset OFFSET u32, len LEN u32, sreg SREG u32'),
  numgen: listed('NFTNL_EXPR_NG_', 'dreg DREG u32, mod MODULUS u32, mode TYPE u32, offset OFFSET u32'),
  meta: listed('NFTNL_EXPR_META_', 'key KEY u32, dreg DREG u32, sreg SREG u32'),
  cmp: listed('NFTNL_EXPR_CMP_', 'sreg SREG u32, op OP u32, data DATA bytes'),
  range: listed('NFTNL_EXPR_RANGE_', 'sreg SREG u32, op OP u32, from FROM_DATA bytes, to TO_DATA bytes'),
  immediate: listed('NFTNL_EXPR_IMM_', 'dreg DREG u32, data DATA bytes, verdict VERDICT u32, chain CHAIN str'),
  counter: listed('NFTNL_EXPR_CTR_', 'packets PACKETS u64, bytes BYTES u64'),
  bitwise: listed('NFTNL_EXPR_BITWISE_', 'sreg SREG u32, dreg DREG u32, len LEN u32, mask MASK bytes, xor XOR bytes'),
  nat: listed('NFTNL_EXPR_NAT_', 'nat TYPE u32, family FAMILY u32, regAddrMin REG_ADDR_MIN u32, regAddrMax REG_ADDR_MAX u32, ' +
    'regProtoMin REG_PROTO_MIN u32, regProtoMax REG_PROTO_MAX u32, flags FLAGS u32'),
  lookup: listed('NFTNL_EXPR_LOOKUP_', 'sreg SREG u32, dreg DREG u32, set SET str, setId SET_ID u32, flags FLAGS u32'),
  dynset: listed('NFTNL_EXPR_DYNSET_', 'sregKey SREG_KEY u32, sregData SREG_DATA u32, op OP u32, ' +
    'timeout TIMEOUT u64, set SET_NAME str, setId SET_ID u32'),
  log: listed('NFTNL_EXPR_LOG_', 'prefix PREFIX str, group GROUP u16, snaplen SNAPLEN u32, qthreshold QTHRESHOLD u16, level LEVEL u32'),
  ct: listed('NFTNL_EXPR_CT_', 'dreg DREG u32, key KEY u32, dir DIR u8, sreg SREG u32'),
  limit: listed('NFTNL_EXPR_LIMIT_', 'rate RATE u64, unit UNIT u64, burst BURST u32, type TYPE u32, flags FLAGS u32'),
  reject: listed('NFTNL_EXPR_REJECT_', 'reject TYPE u32, code CODE u8'),
  masq: listed('NFTNL_EXPR_MASQ_', 'flags FLAGS u32, regProtoMin REG_PROTO_MIN u32, regProtoMax REG_PROTO_MAX u32'),
  fib: listed('NFTNL_EXPR_FIB_', 'dreg DREG u32, result RESULT u32, flags FLAGS u32'),
  notrack: {},
  byteorder: listed('NFTNL_EXPR_BYTEORDER_', 'dreg DREG u32, sreg SREG u32, op OP u32, len LEN u32, size SIZE u32'),
  flow_offload: listed('NFTNL_EXPR_FLOW_TABLE_', 'table NAME str'),
};

/** LISTED_ATTRS with their ids, read from the header when first needed (field -> [id, width]). */
let attrIds: Record<string, Record<string, [number, AttrWidth]>> | undefined;
export function listedAttrIds(): Record<string, Record<string, [number, AttrWidth]>> {
  return (attrIds ??= Object.fromEntries(Object.entries(LISTED_ATTRS).map(([expr, fields]) =>
    [expr, Object.fromEntries(Object.entries(fields).map(([f, [name, w]]) => [f, [uapi(name), w]]))])));
}

/**
 * The kernel's enum values the decoder names, by the names NftExpr uses; read when first needed. Key
 * enums are read whole (NFT_META_L4PROTO -> l4proto), so a key the product does not know still gets
 * the kernel's name; `pkts` is NftExpr's `packets`.
 */
let kernel: ReturnType<typeof readKernelEnums> | undefined;
function readKernelEnums() {
  const meta = uapiEnum('NFT_META_');
  delete meta.iftype; // the enum member; NFT_META_IIFTYPE (a define beside it) is its documented name
  const ct = uapiEnum('NFT_CT_');
  ct.packets = ct.pkts!;
  delete ct.pkts;
  return {
    family: pick('NFPROTO_', {
      inet: 'INET', ip: 'IPV4', arp: 'ARP', netdev: 'NETDEV', bridge: 'BRIDGE', ip6: 'IPV6',
    }) satisfies Record<NftFamily, number>,
    hook: pick('NF_INET_', {
      prerouting: 'PRE_ROUTING', input: 'LOCAL_IN', forward: 'FORWARD', output: 'LOCAL_OUT', postrouting: 'POST_ROUTING',
    }),
    payloadBase: pick('NFT_PAYLOAD_', { ll: 'LL_HEADER', network: 'NETWORK_HEADER', transport: 'TRANSPORT_HEADER', inner: 'INNER_HEADER' }),
    cmpOp: pick('NFT_CMP_', { eq: 'EQ', neq: 'NEQ', lt: 'LT', lte: 'LTE', gt: 'GT', gte: 'GTE' }),
    metaKey: meta,
    ctKey: ct,
    verdict: {
      ...pick('NF_', { drop: 'DROP', accept: 'ACCEPT' }),
      ...pick('NFT_', { continue: 'CONTINUE', break: 'BREAK', jump: 'JUMP', goto: 'GOTO', return: 'RETURN' }),
    },
    natRange: pick('NF_NAT_RANGE_', {
      mapIps: 'MAP_IPS', protoSpecified: 'PROTO_SPECIFIED', random: 'PROTO_RANDOM', persistent: 'PERSISTENT',
      fullyRandom: 'PROTO_RANDOM_FULLY',
    }),
    natType: pick('NFT_NAT_', { snat: 'SNAT', dnat: 'DNAT' }),
    ngMode: pick('NFT_NG_', { inc: 'INCREMENTAL', random: 'RANDOM' }),
    ctDir: pick('IP_CT_DIR_', { original: 'ORIGINAL', reply: 'REPLY' }),
    reject: pick('NFT_REJECT_', { icmp: 'ICMP_UNREACH', tcpReset: 'TCP_RST', icmpx: 'ICMPX_UNREACH' }),
    dynsetOp: pick('NFT_DYNSET_OP_', { add: 'ADD', update: 'UPDATE', delete: 'DELETE' }),
    fibFlag: pick('NFTA_FIB_F_', { saddr: 'SADDR', daddr: 'DADDR', mark: 'MARK', iif: 'IIF', oif: 'OIF', present: 'PRESENT' }),
    fibResult: pick('NFT_FIB_RESULT_', { oif: 'OIF', oifname: 'OIFNAME', addrtype: 'ADDRTYPE' }),
    lookupInvert: uapi('NFT_LOOKUP_F_INV'),
    elemIntervalEnd: uapi('NFT_SET_ELEM_INTERVAL_END'),
  };
}

/** { name: SUFFIX } -> { name: the value of PREFIX + SUFFIX in the headers }. */
function pick<K extends string>(prefix: string, names: Record<K, string>): Record<K, number> {
  return Object.fromEntries(Object.entries<string>(names).map(([name, suffix]) => [name, uapi(prefix + suffix)])) as Record<K, number>;
}

/** The kernel's constants the decoder uses (tests check them against src's encoder: nft-uapi.test.ts). */
export const kernelEnums = (): ReturnType<typeof readKernelEnums> => (kernel ??= readKernelEnums());

const familyByNum = (n: number): NftFamily => nameOf(kernelEnums().family, n);
const hookName = (n: number) => nameOf(kernelEnums().hook, n);

function tableInfo(t: RawTable): NftTableInfo {
  return { family: familyByNum(t.family), name: t.name, handle: t.handle, flags: t.flags, ...(t.comment ? { comment: t.comment } : {}) };
}

export async function nftListTables(opts?: NativeCallOptions): Promise<NftTableInfo[]> {
  return (await loadNative().nftListTables(nsArg(opts))).map(tableInfo);
}

/** Lists one table: chains, sets/maps (with elements unless elements=false), rules with handles. */
export async function nftList(family: NftFamily, table: string, opts?: NativeCallOptions & { elements?: boolean }):
  Promise<NftTableListing> {
  const raw = await loadTestNative().nftList(kernelEnums().family[family], table, opts?.elements ?? true, nsArg(opts));
  const chains: NftChainInfo[] = raw.chains.map((c) => ({
    family: familyByNum(c.family), table: c.table, name: c.name, handle: c.handle,
    ...(c.hooknum !== undefined ? {
      hook: (family === 'netdev' ? 'ingress' : hookName(c.hooknum)), type: c.type as NftChainInfo['type'],
      priority: c.priority,
    } : {}),
    ...(c.policy !== undefined ? { policy: c.policy === kernelEnums().verdict.accept ? 'accept' : 'drop' } as const : {}),
    ...(c.device ? { device: c.device } : {}),
    ...(c.comment ? { comment: c.comment } : {}),
  }));
  const sets: NftSetInfo[] = raw.sets.map((s) => ({
    ...s, family: familyByNum(s.family),
    elements: s.elements.map((e) => {
      const out: NftElementInfo = { key: e.key };
      if (e.keyEnd) out.keyEnd = e.keyEnd;
      if (e.data) out.data = e.data;
      if (e.verdictCode !== undefined) out.verdict = verdictFromCode(e.verdictCode, e.chain);
      if (e.flags && (e.flags & kernelEnums().elemIntervalEnd)) out.intervalEnd = true;
      if (e.timeout) out.timeout = e.timeout;
      if (e.expires) out.expires = e.expires;
      if (e.comment) out.comment = e.comment;
      return out;
    }),
  }));
  const rules: NftRuleInfo[] = raw.rules.map((r) => ({
    family: familyByNum(r.family), table: r.table, chain: r.chain, handle: r.handle,
    ...(r.comment ? { comment: r.comment } : {}),
    exprs: r.exprs.map((x) => decodeExpr(x.name, x.attrs)),
  }));
  return { table: tableInfo(raw.table), chains, sets, rules };
}

/** NF_NAT_RANGE_* bits: a map of addresses and a port follow from the registers; random, persistent and
 * fully-random change the choice of source port, so they are kept; any other bit (an offset, netmap)
 * gives null: the expression stays raw rather than be listed as something it is not. */
function natFlags(bits: number | undefined): { random?: boolean; persistent?: boolean; fullyRandom?: boolean } | undefined | null {
  if (!bits) return undefined;
  const NAT_RANGE = kernelEnums().natRange;
  if (bits & ~Object.values(NAT_RANGE).reduce((a, b) => a | b, 0)) return null;
  const out: { random?: boolean; persistent?: boolean; fullyRandom?: boolean } = {};
  if (bits & NAT_RANGE.random) out.random = true;
  if (bits & NAT_RANGE.persistent) out.persistent = true;
  if (bits & NAT_RANGE.fullyRandom) out.fullyRandom = true;
  return Object.keys(out).length ? out : undefined;
}

function verdictFromCode(code: number, chain?: string): NftVerdict {
  const VERDICT = kernelEnums().verdict;
  if (code === VERDICT.jump) return { jump: chain ?? '' };
  if (code === VERDICT.goto) return { goto: chain ?? '' };
  const name = (Object.keys(VERDICT) as (keyof typeof VERDICT)[]).find((k) => VERDICT[k] === code);
  return (name === 'break' || !name ? 'continue' : name) as NftVerdict;
}

/** Value -> name; the first name of a value wins (a header's later alias, NFT_META_IFTYPE, is not the name). */
const rev = <T extends Record<string, number>>(m: T): Record<number, keyof T> => {
  const out: Record<number, keyof T> = {};
  for (const [k, v] of Object.entries(m)) if (!(v in out)) out[v] = k;
  return out;
};
const nameOf = <T extends Record<string, number>>(m: T, v: number): keyof T => rev(m)[v]!;

/** Decodes a listed expression back into the NftExpr shape (best effort; unknown ones stay raw). */
function decodeExpr(name: string, attrs: Record<number, Uint8Array>): NftRuleInfo['exprs'][number] {
  const table = listedAttrIds()[name];
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
  const K = kernelEnums();
  switch (name) {
    case 'payload': return { type: 'payload', base: nameOf(K.payloadBase, n('base')), offset: n('offset'), len: n('len'), dreg: n('dreg') };
    case 'meta': return f.dreg !== undefined ? { type: 'meta', key: nameOf(K.metaKey, n('key')) as MetaKey, dreg: n('dreg') }
      : { type: 'metaSet', key: nameOf(K.metaKey, n('key')) as MetaKey, sreg: n('sreg') };
    case 'cmp': return { type: 'cmp', sreg: n('sreg'), op: nameOf(K.cmpOp, n('op')), data: f.data as Uint8Array };
    case 'range':
      return { type: 'range', sreg: n('sreg'), op: nameOf(K.cmpOp, n('op')) as 'eq' | 'neq', from: f.from as Uint8Array,
        to: f.to as Uint8Array };
    case 'bitwise':
      return { type: 'bitwise', sreg: n('sreg'), dreg: n('dreg'), len: n('len'), mask: f.mask as Uint8Array, xor: f.xor as Uint8Array };
    case 'lookup': return {
      type: 'lookup', sreg: n('sreg'), set: f.set as string,
      ...(f.dreg !== undefined ? { dreg: n('dreg') } : {}), ...(n('flags') & K.lookupInvert ? { invert: true } : {}),
    };
    case 'immediate':
      if (n('dreg') === 0 && f.verdict !== undefined) return { type: 'verdict', verdict: verdictFromCode(n('verdict'), f.chain as string) };
      return { type: 'immediate', dreg: n('dreg'), data: f.data as Uint8Array };
    case 'numgen': return { type: 'numgen', mode: nameOf(K.ngMode, n('mode')), mod: n('mod'), offset: n('offset') ?? 0, dreg: n('dreg') };
    case 'ct': return f.dreg !== undefined
      ? { type: 'ct', key: nameOf(K.ctKey, n('key')), dreg: n('dreg'),
        ...(f.dir !== undefined ? { dir: nameOf(K.ctDir, n('dir')) } : {}) } as NftExpr
      : { type: 'ctSet', key: nameOf(K.ctKey, n('key')) as 'mark', sreg: n('sreg') };
    case 'nat': {
      const flags = natFlags(f.flags as number | undefined);
      if (flags === null) return { type: name, raw: attrs };
      return {
        type: 'nat', nat: nameOf(K.natType, n('nat')), family: n('family') === K.family.ip6 ? 'ip6' : 'ip',
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
    case 'reject': return { type: 'reject', reject: nameOf(K.reject, n('reject')), code: n('code') };
    case 'counter': return { type: 'counter', packets: n('packets'), bytes: n('bytes') };
    case 'dynset': return {
      type: 'dynset', op: nameOf(K.dynsetOp, n('op')), set: f.set as string, sregKey: n('sregKey'),
      ...(f.sregData !== undefined ? { sregData: n('sregData') } : {}), ...(f.timeout !== undefined ? { timeout: n('timeout') } : {}),
    };
    case 'fib': {
      const flags = (Object.keys(K.fibFlag) as Array<keyof typeof K.fibFlag>).filter((k) => n('flags') & K.fibFlag[k]);
      return { type: 'fib', flags: [...flags], result: nameOf(K.fibResult, n('result')), dreg: n('dreg') };
    }
    case 'log': return { type: 'log', ...(f.prefix !== undefined ? { prefix: f.prefix as string } : {}), ...(f.group !== undefined ? { group: n('group') } : {}) };
    case 'notrack': return { type: 'notrack' };
    default: return { type: name, raw: attrs };
  }
}


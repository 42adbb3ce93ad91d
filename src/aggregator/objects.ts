// The objects document: a producer's nftables objects as YAML/JSON a person can write, turned into
// the addon's NftOps (validated, with the path of the first problem in the error). Used by
// `kpng publish` and carried as is by the aggregator's gRPC service.
//
//   tables:
//     - family: ip                    # ip | ip6 | inet | arp | bridge | netdev
//       name: denylist
//       sets:
//         - name: deny
//           type: ipv4_addr           # or a concatenation: [ipv4_addr, inet_proto, inet_service]
//           flags: [interval]         # CIDRs and FIRST-LAST ranges (addresses, ports)
//           elements: [192.168.50.0/24]  # maps: `data: TYPE` (or `data: verdict`) and elements {key, data|verdict}
//       chains:
//         - name: pre
//           hook: prerouting          # base chains: hook, type, priority, policy
//           type: filter
//           priority: -300
//           rules:                    # typed rules (src/aggregator/rules.ts) ...
//             - { match: { saddr: "@deny", protocol: tcp }, counter: true, verdict: drop }
//             - exprs:                # ... or the kernel's expressions, as NftExpr (src/native/nft-types.ts)
//                 - { type: payload, base: network, offset: 12, len: 4, dreg: 1 }
//                 - { type: lookup, sreg: 1, set: deny }
//                 - { type: verdict, verdict: drop }
//
// Byte fields of expressions (cmp data, immediate data, range from/to, bitwise mask/xor) take an
// IPv4/IPv6 address or "0x" followed by hex digits. Element keys are typed by the set: addresses,
// ports and protocols (numbers or tcp/udp/sctp/icmp), marks and integers (numbers, host order),
// interface names; a concatenation's key is a list.
import {
  concat, ifname, ipAddr, ipv4, ipv6, NFT_DATATYPES, port, proto, u32host,
  type NftChain, type NftDataType, type NftElement, type NftExpr, type NftFamily, type NftOp, type NftSet, type NftVerdict,
} from '../native/nft-types';
import { EXPR_ATTRS } from '../native/encode';
import { pushAll } from '../util/push-all';
import { INTERVAL_TYPES, intervalElements, parseRange, type Range } from './intervals';
import { compileRule, RuleError, type RuleSpec } from './rules';

export class ObjectsError extends Error {
  constructor(readonly path: string, reason: string) {
    super(`${path}: ${reason}`);
    this.name = 'ObjectsError';
  }
}

const FAMILIES = ['ip', 'ip6', 'inet', 'arp', 'bridge', 'netdev'];
const HOOKS = ['prerouting', 'input', 'forward', 'output', 'postrouting', 'ingress'];
const BYTE_FIELDS = ['data', 'from', 'to', 'mask', 'xor'];

type Obj = Record<string, unknown>;

export function obj(v: unknown, at: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ObjectsError(at, 'expected a mapping');
  return v as Obj;
}
export function list(v: unknown, at: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ObjectsError(at, 'expected a list');
  return v;
}
export function str(v: unknown, at: string, allowed?: string[]): string {
  if (typeof v !== 'string' || v === '') throw new ObjectsError(at, 'expected a non-empty string');
  if (allowed && !allowed.includes(v)) throw new ObjectsError(at, `${JSON.stringify(v)} is not one of ${allowed.join(', ')}`);
  return v;
}
function num(v: unknown, at: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new ObjectsError(at, 'expected an integer');
  return v;
}
function optStr(v: unknown, at: string): string | undefined { return v === undefined ? undefined : str(v, at); }

/** "0x0a00" or an IP address, as bytes. */
function bytes(v: unknown, at: string): Uint8Array {
  if (typeof v === 'string') {
    if (/^0x([0-9a-fA-F]{2})+$/.test(v)) return new Uint8Array(Buffer.from(v.slice(2), 'hex'));
    try { return ipAddr(v); } catch { /* fall through */ }
  }
  throw new ObjectsError(at, 'expected an IP address or 0x followed by hex bytes');
}

function dataType(v: unknown, at: string): NftDataType | NftDataType[] {
  const types = Object.keys(NFT_DATATYPES);
  if (Array.isArray(v)) return v.map((x, i) => str(x, `${at}[${i}]`, types) as NftDataType);
  return str(v, at, types) as NftDataType;
}

/** One field of a key / data value by its type. */
function field(t: NftDataType, v: unknown, at: string): Uint8Array {
  try {
    switch (t) {
      case 'ipv4_addr': return ipv4(str(v, at));
      case 'ipv6_addr': return ipv6(str(v, at));
      case 'inet_service': return port(num(v, at));
      case 'inet_proto': return typeof v === 'string' ? proto(str(v, at, ['tcp', 'udp', 'sctp', 'icmp', 'icmpv6']) as 'tcp') : proto(num(v, at));
      case 'mark': case 'integer': case 'ifindex': case 'ct_state': return typeof v === 'string' ? bytes(v, at) : u32host(num(v, at));
      case 'ifname': return ifname(str(v, at));
      default: return bytes(v, at);
    }
  } catch (e) {
    if (e instanceof ObjectsError) throw e;
    throw new ObjectsError(at, (e as Error).message);
  }
}

function value(t: NftDataType | NftDataType[], v: unknown, at: string): Uint8Array {
  if (!Array.isArray(t) || t.length === 1) return field(Array.isArray(t) ? t[0] : t, v, at);
  const vs = list(v, at);
  if (vs.length !== t.length) throw new ObjectsError(at, `expected ${t.length} values (${t.join(' . ')})`);
  return concat(...t.map((ft, i) => field(ft, vs[i], `${at}[${i}]`)));
}

function verdict(v: unknown, at: string): NftVerdict {
  if (typeof v === 'string') return str(v, at, ['accept', 'drop', 'continue', 'return']) as NftVerdict;
  const o = obj(v, at);
  if (o.jump !== undefined) return { jump: str(o.jump, `${at}.jump`) };
  if (o.goto !== undefined) return { goto: str(o.goto, `${at}.goto`) };
  throw new ObjectsError(at, 'expected accept, drop, continue, return, {jump: CHAIN} or {goto: CHAIN}');
}

function expr(v: unknown, at: string): NftExpr {
  const o = { ...obj(v, at) };
  const type = str(o.type, `${at}.type`);
  const known = [...Object.keys(EXPR_ATTRS), 'verdict', 'metaSet', 'ctSet'];
  if (!known.includes(type)) throw new ObjectsError(`${at}.type`, `unknown expression ${JSON.stringify(type)} (one of ${known.join(', ')})`);
  for (const f of BYTE_FIELDS) if (o[f] !== undefined) o[f] = bytes(o[f], `${at}.${f}`);
  if (type === 'verdict') o.verdict = verdict(o.verdict, `${at}.verdict`);
  if ((type === 'lookup' || type === 'dynset') && o.setId !== undefined) throw new ObjectsError(`${at}.setId`, 'set ids are not supported: name the set');
  return o as unknown as NftExpr;
}

/** Elements of an interval set or map: CIDRs, FIRST-LAST ranges, single values (a map's as `key`). */
function intervalSetElements(set: NftSet, vs: unknown[], sat: string): NftElement[] {
  const t = set.keyType as NftDataType;
  const ranges: Range[] = [];
  const data: ((e: NftElement) => void)[] = [];
  vs.forEach((ev, ei) => {
    const eat = `${sat}.elements[${ei}]`;
    const keyAt = set.dataType === undefined ? eat : `${eat}.key`;
    const e = set.dataType === undefined ? undefined : obj(ev, eat);
    try {
      ranges.push(parseRange(t, e ? e.key : ev));
    } catch (err) {
      throw new ObjectsError(keyAt, (err as Error).message);
    }
    if (e) {
      const d = set.dataType === 'verdict' ? { verdict: verdict(e.verdict, `${eat}.verdict`) } : { data: value(set.dataType!, e.data, `${eat}.data`) };
      data.push((el) => Object.assign(el, d));
    }
  });
  const r = intervalElements(ranges, set.dataType === undefined ? undefined : data, (el, f) => f(el));
  if ('overlap' in r) throw new ObjectsError(`${sat}.elements[${r.overlap}]`, 'overlaps another range of this map');
  return r;
}

/** Elements of `set` from a document's list (plain keys, map entries {key, data|verdict}, or ranges). */
export function setElements(set: NftSet, vs: unknown[], sat: string): NftElement[] {
  if (set.flags?.interval) return intervalSetElements(set, vs, sat);
  return vs.map((ev, ei) => {
    const eat = `${sat}.elements[${ei}]`;
    if (set.dataType === undefined) return { key: value(set.keyType, ev, eat) };
    const e = obj(ev, eat);
    const el: NftElement = { key: value(set.keyType, e.key, `${eat}.key`) };
    if (set.dataType === 'verdict') el.verdict = verdict(e.verdict, `${eat}.verdict`);
    else el.data = value(set.dataType, e.data, `${eat}.data`);
    return el;
  });
}

export interface ParseOptions {
  /** Sets a table already has (a patch's typed rules may look them up). */
  existingSets?: (family: NftFamily, table: string) => Iterable<NftSet>;
}

/** The ops that build every object of the document from nothing. */
export function parseObjects(doc: unknown, opts: ParseOptions = {}): NftOp[] {
  const root = obj(doc ?? {}, '(document)');
  for (const k of Object.keys(root)) if (k !== 'tables') throw new ObjectsError(k, 'unknown field (the document has `tables`)');
  const ops: NftOp[] = [];
  const rules: NftOp[] = [];
  list(root.tables, 'tables').forEach((tv, ti) => {
    const at = `tables[${ti}]`;
    const t = obj(tv, at);
    const family = str(t.family, `${at}.family`, FAMILIES) as NftFamily;
    const name = str(t.name, `${at}.name`);
    ops.push({ op: 'add', table: { family, name, comment: optStr(t.comment, `${at}.comment`) } });
    const tableSets = new Map<string, NftSet>([...(opts.existingSets?.(family, name) ?? [])].map((x) => [x.name, x]));
    const setOps: NftOp[] = [];
    list(t.sets, `${at}.sets`).forEach((sv, si) => {
      const sat = `${at}.sets[${si}]`;
      const s = obj(sv, sat);
      const keyType = dataType(s.type, `${sat}.type`);
      const set: NftSet = { family, table: name, name: str(s.name, `${sat}.name`), keyType, comment: optStr(s.comment, `${sat}.comment`) };
      if ((keyType === 'integer' || keyType === 'string') && s.keyLen === undefined) throw new ObjectsError(`${sat}.keyLen`, `a ${keyType} key needs keyLen`);
      if (s.keyLen !== undefined) set.keyLen = num(s.keyLen, `${sat}.keyLen`);
      if (s.data !== undefined) set.dataType = dataType(s.data, `${sat}.data`);
      if (s.timeout !== undefined) { set.timeout = num(s.timeout, `${sat}.timeout`); set.flags = { timeout: true }; }
      const flags = list(s.flags, `${sat}.flags`).map((f, fi) => str(f, `${sat}.flags[${fi}]`, ['interval']));
      if (flags.includes('interval')) {
        if (Array.isArray(keyType) || !INTERVAL_TYPES.includes(keyType)) throw new ObjectsError(`${sat}.type`, `interval sets take one of ${INTERVAL_TYPES.join(', ')}`);
        set.flags = { ...set.flags, interval: true };
      }
      tableSets.set(set.name, set);
      setOps.push({ op: 'add', set });
      const elements = setElements(set, list(s.elements, `${sat}.elements`), sat);
      if (elements.length) setOps.push({ op: 'add', elements: { family, table: name, set: set.name, elements } });
    });
    list(t.chains, `${at}.chains`).forEach((cv, ci) => {
      const cat = `${at}.chains[${ci}]`;
      const c = obj(cv, cat);
      const chain: NftChain = { family, table: name, name: str(c.name, `${cat}.name`), comment: optStr(c.comment, `${cat}.comment`) };
      if (c.hook !== undefined) {
        chain.hook = str(c.hook, `${cat}.hook`, HOOKS) as NftChain['hook'];
        chain.type = str(c.type ?? 'filter', `${cat}.type`, ['filter', 'nat', 'route']) as NftChain['type'];
        chain.priority = c.priority === undefined ? 0 : num(c.priority, `${cat}.priority`);
        chain.policy = str(c.policy ?? 'accept', `${cat}.policy`, ['accept', 'drop']) as NftChain['policy'];
        if (c.device !== undefined) chain.device = str(c.device, `${cat}.device`);
      }
      ops.push({ op: 'add', chain });
      list(c.rules, `${cat}.rules`).forEach((rv, ri) => {
        const rat = `${cat}.rules[${ri}]`;
        const r = obj(rv, rat);
        let exprs: NftExpr[];
        if (r.exprs !== undefined) {
          const typed = Object.keys(r).filter((k) => k !== 'exprs' && k !== 'comment');
          if (typed.length) throw new ObjectsError(`${rat}.${typed[0]}`, 'a rule has either exprs (kernel expressions) or match/counter/log/verdict, not both');
          exprs = list(r.exprs, `${rat}.exprs`).map((x, xi) => expr(x, `${rat}.exprs[${xi}]`));
          if (exprs.length === 0) throw new ObjectsError(`${rat}.exprs`, 'a rule needs at least one expression');
        } else {
          try {
            exprs = compileRule(r as RuleSpec, { family, sets: tableSets }, rat);
          } catch (e) {
            if (e instanceof RuleError) throw new ObjectsError(e.path, e.message.slice(e.path.length + 2));
            throw e;
          }
        }
        rules.push({ op: 'add', rule: { family, table: name, chain: chain.name, exprs, comment: optStr(r.comment, `${rat}.comment`) } });
      });
    });
    pushAll(ops, setOps);
  });
  return [...ops, ...rules]; // rules last: they may look up sets declared after their chain
}

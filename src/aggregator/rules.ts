// Typed rules for producers: matches (addresses, ports, protocol, interfaces, mark, ct state, set
// lookups), a counter, a log and a verdict (accept/drop/reject/jump/goto/return, or a verdict map),
// compiled into the kernel expressions the addon encodes — what `nft` would generate for the same
// rule, so `nft list ruleset` prints it the way a person would have written it.
//
//   { match: { saddr: '192.0.2.0/24', protocol: 'tcp', dport: '1000-2000', ctState: ['new'] },
//     counter: true, log: { prefix: 'ssh: ' }, verdict: 'drop' }
//
// Values: an address or CIDR; a port or "LOW-HIGH"; a protocol name or number; an interface name
// ("veth*" matches a prefix); a mark ("0x10" or "0x10/0xff", value/mask); "@SET" looks the field up
// in a set of the same table. A leading "!" negates (not for ctState). Every match must hold.
import {
  CT_STATE, IPPROTO, NFT_REG_1, NFT_REG32, ipAddr, port as portBytes,
  type NftDataType, type NftExpr, type NftFamily, type NftSet, type NftVerdict,
} from '../native/nft-types';
import { expr } from '../native/nft-expr';

/** Fields a rule can match on, one value each, and use as keys of set/map lookups. */
export type MatchField = 'saddr' | 'daddr' | 'protocol' | 'sport' | 'dport' | 'iifname' | 'oifname' | 'mark';

export interface RuleMatch {
  saddr?: string;
  daddr?: string;
  protocol?: string | number;
  sport?: string | number;
  dport?: string | number;
  iifname?: string;
  oifname?: string;
  mark?: string | number;
  /** Any of these conntrack states. */
  ctState?: (keyof typeof CT_STATE)[];
  /** Concatenated lookup: `saddr . protocol . dport @allowed` (negate: not in the set). */
  lookup?: { keys: MatchField[]; set: string; negate?: boolean };
}

export type RejectWith = 'port-unreachable' | 'host-unreachable' | 'net-unreachable' | 'admin-prohibited' | 'tcp-reset';

export type RuleVerdict =
  | 'accept' | 'drop' | 'return' | 'continue' | 'reject'
  | { reject: RejectWith }
  | { jump: string } | { goto: string }
  /** `KEYS vmap @MAP`: the verdict is the map's data for the packet's key (no verdict when absent). */
  | { vmap: { keys: MatchField[]; map: string } };

export type LogLevel = 'emerg' | 'alert' | 'crit' | 'err' | 'warn' | 'notice' | 'info' | 'debug';

export interface RuleSpec {
  comment?: string;
  match?: RuleMatch;
  counter?: boolean;
  /** true: log with the defaults; group: to NFLOG group N instead of the kernel log. */
  log?: boolean | { prefix?: string; level?: LogLevel; group?: number };
  verdict?: RuleVerdict;
}

export class RuleError extends Error {
  constructor(readonly path: string, reason: string) {
    super(`${path}: ${reason}`);
    this.name = 'RuleError';
  }
}

const LOG_LEVELS: LogLevel[] = ['emerg', 'alert', 'crit', 'err', 'warn', 'notice', 'info', 'debug'];
/** ICMP codes per reject flavour: icmp (IPv4), icmpv6, icmpx (inet, bridge, netdev). */
const REJECT_CODES: Record<Exclude<RejectWith, 'tcp-reset'>, [number, number, number]> = {
  'port-unreachable': [3, 4, 1], 'host-unreachable': [1, 3, 2], 'net-unreachable': [0, 0, 0], 'admin-prohibited': [13, 1, 3],
};
const FIELDS: MatchField[] = ['saddr', 'daddr', 'protocol', 'sport', 'dport', 'iifname', 'oifname', 'mark'];

type IpVer = 4 | 6;

/** What compiling needs to know about the table: its family and its sets (for lookups). */
export interface RuleContext { family: NftFamily; sets: Map<string, Pick<NftSet, 'name' | 'keyType' | 'dataType'>> }

/** Compiles one rule into kernel expressions. Throws a RuleError naming `at` and the field. */
export function compileRule(spec: RuleSpec, ctx: RuleContext, at = 'rule'): NftExpr[] {
  return new RuleCompiler(ctx, at).compile(spec);
}

class RuleCompiler {
  private readonly out: NftExpr[] = [];
  /** The IP version the rule is already restricted to (a dependency was emitted, or the table's family). */
  private ver?: IpVer;

  constructor(private readonly ctx: RuleContext, private readonly at: string) {
    if (ctx.family === 'ip') this.ver = 4;
    if (ctx.family === 'ip6') this.ver = 6;
  }

  private fail(field: string, reason: string): never { throw new RuleError(`${this.at}.${field}`, reason); }

  compile(spec: RuleSpec): NftExpr[] {
    for (const k of Object.keys(spec)) {
      if (!['comment', 'match', 'counter', 'log', 'verdict'].includes(k)) this.fail(k, 'unknown field (match, counter, log, verdict, comment)');
    }
    const m = spec.match ?? {};
    for (const k of Object.keys(m)) {
      if (![...FIELDS, 'ctState', 'lookup'].includes(k)) this.fail(`match.${k}`, `unknown match (one of ${[...FIELDS, 'ctState', 'lookup'].join(', ')})`);
    }
    // nft's order: interfaces and meta first, then the network header, then the transport header.
    if (m.iifname !== undefined) this.ifname('iifname', m.iifname);
    if (m.oifname !== undefined) this.ifname('oifname', m.oifname);
    if (m.mark !== undefined) this.mark(m.mark);
    if (m.ctState !== undefined) this.ctState(m.ctState);
    if (m.saddr !== undefined) this.address('saddr', m.saddr);
    if (m.daddr !== undefined) this.address('daddr', m.daddr);
    if (m.protocol !== undefined) this.protocol(m.protocol);
    if (m.sport !== undefined) this.port('sport', m.sport);
    if (m.dport !== undefined) this.port('dport', m.dport);
    if (m.lookup !== undefined) this.lookup(m.lookup);
    if (spec.counter !== undefined) {
      if (typeof spec.counter !== 'boolean') this.fail('counter', 'expected true or false');
      if (spec.counter) this.out.push(expr.counter());
    }
    if (spec.log !== undefined && spec.log !== false) this.log(spec.log);
    if (spec.verdict !== undefined) this.verdict(spec.verdict, m);
    if (this.out.length === 0) this.fail('verdict', 'a rule needs at least a match, a counter, a log or a verdict');
    return this.out;
  }

  // ---- value helpers ----

  private negated(field: string, v: string | number): { neg: boolean; text: string } {
    if (typeof v === 'number') return { neg: false, text: String(v) };
    if (typeof v !== 'string' || v === '' || v === '!') this.fail(field, 'expected a value');
    return v.startsWith('!') ? { neg: true, text: v.slice(1).trim() } : { neg: false, text: v.trim() };
  }

  private setRef(field: string, text: string, dataMap = false): Pick<NftSet, 'name' | 'keyType' | 'dataType'> {
    const name = text.slice(1);
    const s = this.ctx.sets.get(name);
    if (!s) this.fail(field, `no set ${JSON.stringify(name)} in this table`);
    if (dataMap && s.dataType !== 'verdict') this.fail(field, `${name} is not a verdict map (data: verdict)`);
    if (!dataMap && s.dataType !== undefined) this.fail(field, `${name} is a map: use it with verdict.vmap`);
    return s;
  }

  /** Restricts the rule to IPv4 or IPv6 (meta nfproto in inet tables, meta protocol in bridge/netdev). */
  private requireIp(field: string, v: IpVer): void {
    if (this.ver === v) return;
    if (this.ver !== undefined) this.fail(field, `an IPv${v} value in a rule already limited to IPv${this.ver}`);
    const fam = this.ctx.family;
    if (fam === 'inet') this.out.push(...expr.nfprotoIs(v === 4 ? 'ip' : 'ip6'));
    else if (fam === 'bridge' || fam === 'netdev') this.out.push(...expr.etherTypeIs(v === 4 ? 'ip' : 'ip6'));
    else this.fail(field, `addresses cannot be matched in a ${fam} table`);
    this.ver = v;
  }

  /** The IP version of an address key type, or undefined. */
  private static verOf(t: NftDataType): IpVer | undefined {
    return t === 'ipv4_addr' ? 4 : t === 'ipv6_addr' ? 6 : undefined;
  }

  // ---- loads: one field into a register ----

  private load(field: MatchField, dreg: number, ver?: IpVer): NftExpr {
    switch (field) {
      case 'saddr': case 'daddr': {
        const v = ver ?? this.ver;
        if (v === undefined) this.fail(field, 'cannot tell IPv4 from IPv6 here');
        return field === 'saddr' ? expr.saddr(v === 4 ? 'ip' : 'ip6', dreg) : expr.daddr(v === 4 ? 'ip' : 'ip6', dreg);
      }
      case 'protocol': return expr.l4proto(dreg);
      case 'sport': return expr.thSport(dreg);
      case 'dport': return expr.thDport(dreg);
      case 'iifname': case 'oifname': case 'mark': return expr.meta(field, dreg);
    }
  }

  /** Which set key type a field fits (for checking lookups). */
  private static fits(field: MatchField, t: NftDataType): boolean {
    switch (field) {
      case 'saddr': case 'daddr': return t === 'ipv4_addr' || t === 'ipv6_addr';
      case 'protocol': return t === 'inet_proto';
      case 'sport': case 'dport': return t === 'inet_service';
      case 'iifname': case 'oifname': return t === 'ifname';
      case 'mark': return t === 'mark' || t === 'integer';
    }
  }

  /** Loads `keys` as a concatenation matching the set's key type; returns the first register. */
  private loadKeys(field: string, keys: MatchField[], set: Pick<NftSet, 'name' | 'keyType'>): number {
    const types = Array.isArray(set.keyType) ? set.keyType : [set.keyType];
    if (!Array.isArray(keys) || keys.length === 0) this.fail(field, 'expected a list of keys');
    for (const k of keys) if (!FIELDS.includes(k)) this.fail(field, `unknown key ${JSON.stringify(k)} (one of ${FIELDS.join(', ')})`);
    if (keys.length !== types.length || keys.some((k, i) => !RuleCompiler.fits(k, types[i]))) {
      this.fail(field, `keys ${keys.join(' . ')} do not fit set ${set.name}'s type ${types.join(' . ')}`);
    }
    keys.forEach((_k, i) => { const v = RuleCompiler.verOf(types[i]); if (v) this.requireIp(field, v); });
    let word = 0;
    const loads: NftExpr[] = [];
    keys.forEach((k, i) => {
      loads.push(this.load(k, word === 0 ? NFT_REG_1 : NFT_REG32(word), RuleCompiler.verOf(types[i])));
      word += types[i] === 'ipv6_addr' || types[i] === 'ifname' ? 4 : 1;
    });
    if (word > 16) this.fail(field, 'the key is longer than the 64 bytes of registers');
    this.out.push(...loads);
    return NFT_REG_1;
  }

  // ---- matches ----

  private cmp(data: Uint8Array, neg: boolean): void {
    this.out.push(expr.cmp(NFT_REG_1, neg ? 'neq' : 'eq', data));
  }

  private lookupSet(field: MatchField, text: string, neg: boolean): void {
    const s = this.setRef(`match.${field}`, text);
    this.loadKeys(`match.${field}`, [field], s);
    this.out.push(expr.inSet(NFT_REG_1, s.name, neg));
  }

  private address(field: 'saddr' | 'daddr', v: string): void {
    const { neg, text } = this.negated(`match.${field}`, v);
    if (text.startsWith('@')) return this.lookupSet(field, text, neg);
    const [a, len, extra] = text.split('/');
    let addr: Uint8Array;
    try { addr = ipAddr(a); } catch { this.fail(`match.${field}`, `${JSON.stringify(text)} is not an address or CIDR`); }
    const bits = addr.length * 8;
    const prefix = len === undefined ? bits : /^\d{1,3}$/.test(len) ? Number(len) : NaN;
    if (extra !== undefined || !(prefix >= 0 && prefix <= bits)) this.fail(`match.${field}`, `${JSON.stringify(text)}: bad prefix length`);
    this.requireIp(`match.${field}`, addr.length === 4 ? 4 : 6);
    if (prefix === 0) this.fail(`match.${field}`, `${JSON.stringify(text)} matches every address: leave the match out`);
    const load = this.load(field, NFT_REG_1);
    if (prefix === bits) { this.out.push(load); return this.cmp(addr, neg); }
    const mask = new Uint8Array(addr.length);
    for (let i = 0; i < mask.length; i++) mask[i] = 0xff & (0xff << (8 - Math.max(0, Math.min(8, prefix - i * 8))));
    if (addr.some((b, i) => (b & ~mask[i]) !== 0)) this.fail(`match.${field}`, `${JSON.stringify(text)} has host bits set`);
    if (prefix % 8 === 0) {
      // Byte-aligned prefix: load only the prefix bytes, as nft does.
      const n = prefix / 8;
      this.out.push(expr.addrPrefix(addr.length === 4 ? 'ip' : 'ip6', field, n));
      return this.cmp(addr.subarray(0, n), neg);
    }
    this.out.push(load, expr.and(NFT_REG_1, mask));
    this.cmp(addr, neg);
  }

  private protocol(v: string | number): void {
    const { neg, text } = this.negated('match.protocol', v);
    if (text.startsWith('@')) return this.lookupSet('protocol', text, neg);
    const n = /^\d+$/.test(text) ? Number(text) : IPPROTO[text as keyof typeof IPPROTO];
    if (n === undefined || n > 255) this.fail('match.protocol', `${JSON.stringify(text)}: expected ${Object.keys(IPPROTO).join(', ')} or a number`);
    this.out.push(this.load('protocol', NFT_REG_1));
    this.cmp(new Uint8Array([n]), neg);
  }

  private port(field: 'sport' | 'dport', v: string | number): void {
    const { neg, text } = this.negated(`match.${field}`, v);
    if (text.startsWith('@')) return this.lookupSet(field, text, neg);
    const m = /^(\d{1,5})(?:\s*-\s*(\d{1,5}))?$/.exec(text);
    const lo = m ? Number(m[1]) : NaN, hi = m?.[2] !== undefined ? Number(m[2]) : lo;
    if (!m || lo > 65535 || hi > 65535 || lo > hi) this.fail(`match.${field}`, `${JSON.stringify(text)}: expected a port or LOW-HIGH`);
    this.out.push(this.load(field, NFT_REG_1));
    if (lo === hi) return this.cmp(portBytes(lo), neg);
    if (neg) { this.out.push(expr.range(NFT_REG_1, 'neq', portBytes(lo), portBytes(hi))); return; }
    this.out.push(expr.cmp(NFT_REG_1, 'gte', portBytes(lo)), expr.cmp(NFT_REG_1, 'lte', portBytes(hi)));
  }

  private ifname(field: 'iifname' | 'oifname', v: string): void {
    const { neg, text } = this.negated(`match.${field}`, v);
    if (text.startsWith('@')) return this.lookupSet(field, text, neg);
    const wildcard = text.endsWith('*');
    const name = wildcard ? text.slice(0, -1) : text;
    if (Buffer.byteLength(name) > 15 || (!wildcard && name === '') || /[\s/]/.test(name)) this.fail(`match.${field}`, `${JSON.stringify(text)}: not an interface name`);
    // Exact: the whole zero-padded name; "prefix*": only the prefix bytes (nft's wildcard).
    this.out.push(...expr.ifnameIs(field, name, wildcard, neg ? 'neq' : 'eq'));
  }

  private mark(v: string | number): void {
    const { neg, text } = this.negated('match.mark', v);
    if (text.startsWith('@')) return this.lookupSet('mark', text, neg);
    const num = (s: string) => (/^(0x[0-9a-fA-F]{1,8}|\d{1,10})$/.test(s) && Number(s) <= 0xffffffff ? Number(s) : NaN);
    const [vs, ms] = text.split('/');
    const value = num(vs), mask = ms === undefined ? 0xffffffff : num(ms);
    if (Number.isNaN(value) || Number.isNaN(mask)) this.fail('match.mark', `${JSON.stringify(text)}: expected a number or VALUE/MASK`);
    this.out.push(...expr.metaMarkIs(value, mask, neg ? 'neq' : 'eq'));
  }

  private ctState(v: (keyof typeof CT_STATE)[]): void {
    const list = typeof v === 'string' ? [v] : v;
    if (!Array.isArray(list) || list.length === 0) this.fail('match.ctState', 'expected a list of states');
    let bits = 0;
    for (const s of list) {
      const b = CT_STATE[s];
      if (b === undefined) this.fail('match.ctState', `${JSON.stringify(s)}: one of ${Object.keys(CT_STATE).join(', ')}`);
      bits |= b;
    }
    this.out.push(...expr.hasCtState(bits));
  }

  private lookup(l: NonNullable<RuleMatch['lookup']>): void {
    if (typeof l !== 'object' || l === null || typeof l.set !== 'string') this.fail('match.lookup', 'expected { keys: [...], set: NAME }');
    const s = this.setRef('match.lookup.set', `@${l.set}`);
    this.loadKeys('match.lookup.keys', l.keys, s);
    this.out.push(expr.inSet(NFT_REG_1, s.name, l.negate === true));
  }

  // ---- statements ----

  private log(l: true | { prefix?: string; level?: LogLevel; group?: number }): void {
    if (l === true) { this.out.push(expr.log()); return; }
    if (typeof l !== 'object' || l === null) this.fail('log', 'expected true or { prefix, level, group }');
    for (const k of Object.keys(l)) if (!['prefix', 'level', 'group'].includes(k)) this.fail(`log.${k}`, 'unknown field (prefix, level, group)');
    if (l.prefix !== undefined && (typeof l.prefix !== 'string' || Buffer.byteLength(l.prefix) > 127)) this.fail('log.prefix', 'expected a string of at most 127 bytes');
    if (l.level !== undefined && !LOG_LEVELS.includes(l.level)) this.fail('log.level', `one of ${LOG_LEVELS.join(', ')}`);
    if (l.group !== undefined && !(Number.isInteger(l.group) && l.group >= 0 && l.group <= 65535)) this.fail('log.group', 'expected 0..65535');
    if (l.group !== undefined && l.level !== undefined) this.fail('log', 'a log goes to a group or to the kernel log at a level, not both');
    this.out.push(expr.log({
      ...(l.prefix !== undefined ? { prefix: l.prefix } : {}),
      ...(l.level !== undefined ? { level: LOG_LEVELS.indexOf(l.level) } : {}), ...(l.group !== undefined ? { group: l.group } : {}),
    }));
  }

  private verdict(v: RuleVerdict, m: RuleMatch): void {
    if (typeof v === 'string') {
      if (v === 'reject') return this.reject('port-unreachable', m);
      if (!['accept', 'drop', 'return', 'continue'].includes(v)) this.fail('verdict', `${JSON.stringify(v)}: accept, drop, reject, return, continue, {jump}, {goto}, {reject}, {vmap}`);
      this.out.push(expr.verdict(v as NftVerdict));
      return;
    }
    if (typeof v !== 'object' || v === null || Object.keys(v).length !== 1) this.fail('verdict', 'expected one of accept, drop, reject, return, continue, {jump: CHAIN}, {goto: CHAIN}, {reject: WITH}, {vmap: {keys, map}}');
    if ('jump' in v || 'goto' in v) {
      const chain = 'jump' in v ? v.jump : v.goto;
      if (typeof chain !== 'string' || chain === '') this.fail('verdict', 'expected a chain name');
      this.out.push('jump' in v ? expr.jump(chain) : expr.goto(chain));
      return;
    }
    if ('reject' in v) return this.reject(v.reject, m);
    if ('vmap' in v) {
      const s = this.setRef('verdict.vmap.map', `@${v.vmap?.map}`, true);
      this.loadKeys('verdict.vmap.keys', v.vmap.keys, s);
      this.out.push(expr.vmap(NFT_REG_1, s.name));
      return;
    }
    this.fail('verdict', `unknown verdict ${JSON.stringify(Object.keys(v)[0])}`);
  }

  private reject(w: RejectWith, m: RuleMatch): void {
    if (w === 'tcp-reset') {
      // The kernel sends a reset only for TCP: like nft, insist the rule matches TCP.
      if (m.protocol !== 'tcp' && m.protocol !== 6 && m.protocol !== '6') this.fail('verdict.reject', 'tcp-reset needs match.protocol: tcp');
      this.out.push(expr.tcpReset());
      return;
    }
    const codes = REJECT_CODES[w];
    if (!codes) this.fail('verdict.reject', `${JSON.stringify(w)}: one of ${[...Object.keys(REJECT_CODES), 'tcp-reset'].join(', ')}`);
    if (this.ver === 4) this.out.push(expr.rejectIcmp(codes[0]));
    else if (this.ver === 6) this.out.push(expr.rejectIcmp(codes[1]));
    else this.out.push(expr.rejectIcmpx(codes[2]));
  }
}

// The numbers of the nftables interface, read from the installed C headers rather than written down:
// the kernel's uapi (linux/netfilter/nf_tables.h and its neighbours, from linux-libc-dev) for enum
// values (comparison operators, meta and ct keys, verdicts, ...), and libnftnl's expr.h for the
// expression attribute ids its getters use (the ids the addons' listings carry). The tests' listing
// decoder (nft-list.ts) takes its constants from here, so that it shares none with the product's
// encoder; test/nft-uapi.test.ts checks the encoder's against the same headers.
import * as fs from 'node:fs';

/** The headers read, each with the Debian package that installs it. */
export const HEADERS: ReadonlyArray<{ path: string; pkg: string }> = [
  { path: '/usr/include/linux/netfilter/nf_tables.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/netfilter.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/netfilter/nf_nat.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/netfilter/nf_conntrack_common.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/netfilter/nf_conntrack_tuple_common.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/rtnetlink.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/in.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/linux/in6.h', pkg: 'linux-libc-dev' },
  { path: '/usr/include/libnftnl/expr.h', pkg: 'libnftnl-dev' },
  { path: '/usr/include/libnftnl/table.h', pkg: 'libnftnl-dev' },
  { path: '/usr/include/libnftnl/chain.h', pkg: 'libnftnl-dev' },
  { path: '/usr/include/libnftnl/set.h', pkg: 'libnftnl-dev' },
  { path: '/usr/include/libnftnl/rule.h', pkg: 'libnftnl-dev' },
  { path: '/usr/include/libnftnl/flowtable.h', pkg: 'libnftnl-dev' },
];

/**
 * Integer constants of C header text: enum members (counting on from the previous one, or `= expr`)
 * and object-like `#define NAME expr`. An expression is integers, names defined before, parentheses
 * and the operators + - ~ << >> | & (what these headers use); anything else is skipped. `known`:
 * constants of headers read before (one header's enum may start from another's constant).
 */
export function parseHeader(text: string, known: ReadonlyMap<string, number> = new Map()): Map<string, number> {
  const out = new Map<string, number>();
  const lookup = (n: string) => out.get(n) ?? known.get(n);
  const src = text.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, '').replace(/\\\n/g, ' ');
  // Definitions in the order of the text: a define may use an enum member above it, and the reverse.
  const re = /^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)([ \t]+[^\n]*)?$|\benum\b[^{};]*\{([^}]*)\}/gm;
  for (let m = re.exec(src); m; m = re.exec(src)) {
    if (m[1] !== undefined) {
      // Function-like macros (NAME(...)) are left out: `(` right after the name.
      if (m[2] === undefined || src[m.index + m[0].indexOf(m[1]) + m[1].length] === '(') continue;
      const v = evaluate(m[2], lookup);
      if (v !== undefined) out.set(m[1], v);
      continue;
    }
    let next = 0;
    // Preprocessor lines inside an enum are no members; its defines (aliases: NFT_META_IIFTYPE for
    // NFT_META_IFTYPE) are read after the members they name.
    const body = m[3]!;
    for (const member of body.replace(/^[ \t]*#[^\n]*$/gm, '').split(',')) {
      const e = /^\s*([A-Za-z_]\w*)\s*(?:=\s*([\s\S]+?))?\s*$/.exec(member);
      if (!e || (e[2] === undefined && Number.isNaN(next))) continue;
      const v = e[2] === undefined ? next : evaluate(e[2], lookup);
      if (v === undefined) { next = NaN; continue; }
      out.set(e[1]!, v);
      next = v + 1;
    }
    for (const d of body.matchAll(/^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]+)$/gm)) {
      const v = evaluate(d[2]!, lookup);
      if (v !== undefined && !out.has(d[1]!)) out.set(d[1]!, v);
    }
  }
  return out;
}

/** The value of a C integer expression, undefined when it has something this evaluator does not take. */
export function evaluate(text: string, lookup: (name: string) => number | undefined): number | undefined {
  const tokens = text.match(/0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|[A-Za-z_]\w*|<<|>>|[-+~|&()]|\S/g) ?? [];
  let i = 0;
  const fail = (): never => { throw new Error('unsupported'); };
  const primary = (): number => {
    const t = tokens[i++] ?? fail();
    if (t === '(') { const v = or(); if (tokens[i++] !== ')') fail(); return v; }
    if (t === '-') return -primary();
    if (t === '~') return ~primary();
    if (/^\d|^0[xX]/.test(t)) return Number.parseInt(t.replace(/[uUlL]+$/, ''), t.startsWith('0x') || t.startsWith('0X') ? 16 : 10);
    if (/^[A-Za-z_]/.test(t)) return lookup(t) ?? fail();
    return fail();
  };
  const binary = (ops: string[], operand: () => number, apply: (op: string, a: number, b: number) => number) => (): number => {
    let v = operand();
    while (i < tokens.length && ops.includes(tokens[i]!)) { const op = tokens[i++]!; v = apply(op, v, operand()); }
    return v;
  };
  const additive = binary(['+', '-'], primary, (op, a, b) => (op === '+' ? a + b : a - b));
  const shift = binary(['<<', '>>'], additive, (op, a, b) => (op === '<<' ? a * 2 ** b : Math.floor(a / 2 ** b)));
  const and = binary(['&'], shift, (_, a, b) => Number(BigInt(a) & BigInt(b)));
  const or = binary(['|'], and, (_, a, b) => Number(BigInt(a) | BigInt(b)));
  try {
    const v = or();
    return i === tokens.length && Number.isFinite(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

let cache: Map<string, number> | undefined;

/** Every constant of the headers, read once. Throws, naming the package, when a header is missing. */
export function uapiConstants(): ReadonlyMap<string, number> {
  if (cache) return cache;
  const all = new Map<string, number>();
  for (const h of HEADERS) {
    if (!fs.existsSync(h.path)) throw new Error(`${h.path} is missing: install ${h.pkg} (hack/install-deps.sh)`);
    for (const [k, v] of parseHeader(fs.readFileSync(h.path, 'utf8'), all)) if (!all.has(k)) all.set(k, v);
  }
  return (cache = all);
}

/** One constant; throws when the headers do not define it. */
export function uapi(name: string): number {
  const v = uapiConstants().get(name);
  if (v === undefined) throw new Error(`${name} is not defined in ${HEADERS.map((h) => h.path).join(', ')}`);
  return v;
}

/** Every constant named PREFIX + X, as X (lower case) -> value: an enum read whole, e.g. NFT_META_. */
export function uapiEnum(prefix: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of uapiConstants()) {
    const rest = k.startsWith(prefix) ? k.slice(prefix.length) : undefined;
    if (rest && !/^_|_MAX$/.test(rest)) out[rest.toLowerCase()] = v;
  }
  return out;
}

// Command-line flags read the way Go's pflag reads them (kube-proxy's parser): `--name=value`,
// `--name value`, `-v=2`, `-v 2`, `-v2`, booleans as `--name`, `--name=false` (strconv.ParseBool's
// spellings), list flags repeated or comma separated, `key=bool` maps. Only the flags of the given table
// are taken out of argv; everything else is left, in order, for kpng's own parser.
import { parseGoDuration } from '../util/duration';

export type GoFlagType = 'bool' | 'string' | 'int' | 'float' | 'duration' | 'strings' | 'mapBool' | 'version';

export interface GoFlag {
  name: string;
  type: GoFlagType;
  short?: string;
}

/** A flag's value, typed: durations in ms, lists and maps merged over repeated uses. */
export type GoFlagValue = boolean | string | number | string[] | Record<string, boolean>;

export class GoFlagError extends Error {}

const TRUE = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);
const FALSE = new Set(['0', 'f', 'F', 'false', 'FALSE', 'False']);

export function parseGoBool(text: string): boolean | undefined {
  return TRUE.has(text) ? true : FALSE.has(text) ? false : undefined;
}

/** strconv.ParseInt(s, 0, 32): decimal, 0x hex, 0o / leading-0 octal, 0b binary, optional sign and `_`. */
function parseGoInt(text: string): number | undefined {
  const m = /^([+-]?)(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO]?[0-7_]+|[1-9][0-9_]*|0)$/.exec(text);
  if (!m) return undefined;
  let digits = m[2].replace(/_/g, '');
  if (/^0[0-7]/.test(digits)) digits = `0o${digits.slice(1)}`;
  const n = Number(digits) * (m[1] === '-' ? -1 : 1);
  return Number.isSafeInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 ? n : undefined;
}

/** encoding/csv's reading of one record, as pflag's StringSlice uses it (quotes allowed). */
function splitCsv(text: string): string[] {
  if (text === '') return [];
  const out: string[] = [];
  let cur = '', quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cur += '"'; i++; } else if (c === '"') quoted = false; else cur += c;
    } else if (c === '"' && cur === '') quoted = true;
    else if (c === ',') { out.push(cur); cur = ''; } else cur += c;
  }
  out.push(cur);
  return out;
}

/** Converts one occurrence's text; `prev` is what earlier occurrences gave (lists and maps merge). */
export function convertGoFlag(f: GoFlag, text: string, prev?: GoFlagValue): GoFlagValue {
  const bad = (what: string) => new GoFlagError(`invalid argument ${JSON.stringify(text)} for "--${f.name}" flag: ${what}`);
  switch (f.type) {
    case 'bool': {
      const b = parseGoBool(text);
      if (b === undefined) throw bad('expected true or false');
      return b;
    }
    case 'int': {
      const n = parseGoInt(text.trim());
      if (n === undefined) throw bad('expected a whole number (int32)');
      return n;
    }
    case 'float': {
      const n = Number(text.trim());
      if (text.trim() === '' || !Number.isFinite(n)) throw bad('expected a number');
      return n;
    }
    case 'duration': {
      const ms = parseGoDuration(text);
      if (ms === null) throw bad('expected a duration (e.g. 30s, 1m30s, 2h22m)');
      return ms;
    }
    case 'strings':
      return [...((prev as string[] | undefined) ?? []), ...splitCsv(text).map((s) => s.trim())];
    case 'mapBool': {
      const out: Record<string, boolean> = { ...((prev as Record<string, boolean> | undefined) ?? {}) };
      for (const pair of text.split(',').map((p) => p.trim()).filter(Boolean)) {
        const eq = pair.indexOf('=');
        const b = eq > 0 ? parseGoBool(pair.slice(eq + 1).trim()) : undefined;
        if (b === undefined) throw bad(`${JSON.stringify(pair)} is not key=true or key=false`);
        out[pair.slice(0, eq).trim()] = b;
      }
      return out;
    }
    case 'version':
    case 'string':
      return text;
  }
}

export interface GoFlagsResult {
  /** argv without the table's flags (and their values). */
  rest: string[];
  /** Each flag given, by name, converted. */
  values: Map<string, GoFlagValue>;
}

/** Takes the table's flags out of argv. Unknown flags and positionals stay in `rest`. */
export function extractGoFlags(argv: readonly string[], table: readonly GoFlag[]): GoFlagsResult {
  const byName = new Map(table.map((f) => [f.name, f]));
  const byShort = new Map(table.filter((f) => f.short).map((f) => [f.short!, f]));
  const values = new Map<string, GoFlagValue>();
  const rest: string[] = [];
  const set = (f: GoFlag, text: string) => values.set(f.name, convertGoFlag(f, text, values.get(f.name)));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { rest.push(...argv.slice(i)); break; }
    let f: GoFlag | undefined, inline: string | undefined;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      f = byName.get(eq < 0 ? a.slice(2) : a.slice(2, eq));
      if (eq >= 0) inline = a.slice(eq + 1);
    } else if (a.startsWith('-') && a.length > 1) {
      // -v=2, -v 2 or -v2 (a single-letter shorthand with its value attached).
      f = byShort.get(a[1]);
      if (f && a.length > 2) inline = a[2] === '=' ? a.slice(3) : a.slice(2);
    }
    if (!f) { rest.push(a); continue; }
    if (inline !== undefined) { set(f, inline); continue; }
    // Booleans take no separate value; --version alone means "true" (pflag's NoOptDefVal).
    if (f.type === 'bool' || f.type === 'version') { set(f, 'true'); continue; }
    if (i + 1 >= argv.length) throw new GoFlagError(`flag needs an argument: --${f.name}`);
    set(f, argv[++i]);
  }
  return { rest, values };
}

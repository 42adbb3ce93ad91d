// Node builtins that client-node's ESM files import by default (`import https from 'node:https'`),
// served as CommonJS instead. When an ES module imports a builtin, Node builds an ESM facade of it,
// and doing that for http, https and tls loaded http2, undici, worker_threads, readline, the REPL's
// history and assert as well: resident memory kpng never uses. A default import is the
// builtin's module.exports either way, so only default-only imports are redirected (a file that also
// names an export keeps the real facade).
import * as fs from 'node:fs';
import { isBuiltin } from 'node:module';
import { fileURLToPath } from 'node:url';

const SCHEME = 'kpng-builtin:';

/** Parent module URL -> specifiers it imports only by default (read once from its source). */
const defaultOnly = new Map<string, Set<string>>();

/** The specifiers a module's static imports bring in by default only. */
export function defaultOnlyImports(source: string): Set<string> {
  const all = new Map<string, boolean>();
  for (const m of source.matchAll(/^\s*import\s+([^'";]+?)\s+from\s+['"]([^'"]+)['"]/gm)) {
    const isDefault = /^[A-Za-z_$][\w$]*$/.test(m[1].trim());
    all.set(m[2], (all.get(m[2]) ?? true) && isDefault);
  }
  return new Set([...all].filter(([, d]) => d).map(([s]) => s));
}

function importsOf(parentURL: string): Set<string> {
  let s = defaultOnly.get(parentURL);
  if (!s) {
    try { s = defaultOnlyImports(fs.readFileSync(fileURLToPath(parentURL), 'utf8')); } catch { s = new Set(); }
    defaultOnly.set(parentURL, s);
  }
  return s;
}

/**
 * The URL to serve a builtin import from, when `parentURL` is an ES module under `root` (a file: URL
 * prefix) that imports `specifier` by default only; undefined otherwise (resolve as usual).
 */
export function builtinStandIn(specifier: string, parentURL: string | undefined, root: string): string | undefined {
  if (!parentURL?.startsWith(root) || !parentURL.endsWith('.js') && !parentURL.endsWith('.mjs')) return undefined;
  if (!isBuiltin(specifier) || !importsOf(parentURL).has(specifier)) return undefined;
  return SCHEME + specifier.replace(/^node:/, '');
}

/** The CommonJS source of a stand-in URL from builtinStandIn (undefined for any other URL). */
export function builtinStandInSource(url: string): string | undefined {
  if (!url.startsWith(SCHEME)) return undefined;
  return `module.exports = require(${JSON.stringify(`node:${url.slice(SCHEME.length)}`)});\n`;
}

// `--help` (or -h) for a bench: prints the usage comment at the top of the bench's own source file
// (the compiled file keeps no comments) and exits, before the bench parses its options or starts
// anything.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The leading `//` comment of a source file, without the slashes. */
export function headerComment(source: string): string {
  const out: string[] = [];
  for (const line of source.split('\n')) {
    if (!line.startsWith('//')) break;
    out.push(line.replace(/^\/\/ ?/, ''));
  }
  return out.length > 0 ? `${out.join('\n')}\n` : '';
}

/** The TypeScript source of a compiled bench file (dist/bench/x.js -> bench/x.ts). */
export function sourceOf(compiled: string): string {
  const dist = `${path.sep}dist${path.sep}bench${path.sep}`;
  return compiled.includes(dist) ? compiled.replace(dist, `${path.sep}bench${path.sep}`).replace(/\.js$/, '.ts') : compiled;
}

/** Prints the bench's usage and exits when its arguments ask for help. */
export function helpIfAsked(compiled: string, argv: readonly string[] = process.argv.slice(2)): void {
  if (!argv.includes('--help') && !argv.includes('-h')) return;
  const src = sourceOf(compiled);
  const text = existsSync(src) ? headerComment(readFileSync(src, 'utf8')) : '';
  process.stdout.write(text || `${path.basename(compiled)}: no usage text (${src} not found)\n`);
  process.exit(0);
}

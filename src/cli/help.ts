// The --help texts, made from the declarations (spec.ts, the backend registry): `kpng --help` lists
// the commands and backends and prints every flag once; `kpng COMMAND --help` only that command's.
import { listBackends, type BackendDefinition } from '../backend/registry';
import type { BackendFlag } from '../util/flag-types';
import { COMMANDS, GROUP_TITLES, commandFlags, type CommandSpec, type FlagGroup, type FlagSpec } from './spec';

const WIDTH = 100;
const INDENT = 24;

/** Words wrapped to WIDTH, every line after the first indented by `indent`. */
function wrap(text: string, indent: number, first = indent): string {
  const lines: string[] = [];
  let line = '';
  let room = WIDTH - first;
  for (const w of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + w.length > room) { lines.push(line); line = w; room = WIDTH - indent; } else line = line ? `${line} ${w}` : w;
  }
  if (line) lines.push(line);
  return lines.join('\n' + ' '.repeat(indent));
}

function flagLine(f: FlagSpec | BackendFlag, dflt?: string | boolean): string {
  const short = 'short' in f && f.short ? `-${f.short}, ` : '';
  const left = `  ${short}--${f.name}${f.type === 'string' ? ` ${f.placeholder ?? 'VALUE'}` : ''}`;
  const d = dflt !== undefined && dflt !== false && dflt !== '' ? ` (default ${dflt})` : '';
  const text = wrap(f.help + d, INDENT);
  return left.length < INDENT - 1 ? `${left.padEnd(INDENT)}${text}` : `${left}\n${' '.repeat(INDENT)}${text}`;
}

function groupsText(groups: FlagGroup[], flags: FlagSpec[]): string[] {
  const out: string[] = [];
  for (const g of groups) {
    const these = flags.filter((f) => f.group === g);
    if (these.length === 0) continue;
    out.push(` ${GROUP_TITLES[g]}:`, ...these.map((f) => flagLine(f)));
  }
  return out;
}

/** The backends, one line each, then their flags: a flag several backends share once, under all their names. */
export function backendsText(extra: Array<{ name: string; summary: string }> = []): string[] {
  const defs: Array<Pick<BackendDefinition, 'name' | 'summary' | 'flags'>> = [...listBackends(), ...extra];
  const width = Math.max(...defs.map((d) => d.name.length)) + 2;
  const out = defs.map((d) => `  ${d.name.padEnd(width)} ${wrap(d.summary, width + 3)}`);
  const owners = new Map<BackendFlag, string[]>();
  for (const d of defs) for (const f of d.flags ?? []) owners.set(f, [...(owners.get(f) ?? []), d.name]);
  const byOwners = new Map<string, BackendFlag[]>();
  for (const [f, names] of owners) byOwners.set(names.join(', '), [...(byOwners.get(names.join(', ')) ?? []), f]);
  for (const [names, flags] of byOwners) out.push(` --to ${names}:`, ...flags.map((f) => flagLine(f, f.default)));
  return out;
}

function usageLines(cmds: CommandSpec[]): string[] {
  const forms = cmds.flatMap((c) => c.usage.map((u) => ({ u: `kpng ${u}`, s: c.usage[0] === u ? c.summary : '' })));
  return forms.map(({ u, s }) => (s ? `  ${u}\n${' '.repeat(INDENT)}${wrap(s, INDENT)}` : `  ${u}`));
}

/** `kpng --help`. */
export function helpText(): string {
  const nodeCommands = COMMANDS.filter((c) => c.backends);
  const groups = [...new Set(nodeCommands.flatMap((c) => c.groups))];
  const flags = [...new Map(nodeCommands.flatMap(commandFlags).map((f) => [f.name, f])).values()];
  return [
    'kpng: a Kubernetes service proxy built around the expected node-local state (ENLS).',
    '',
    'Usage:',
    ...usageLines(COMMANDS),
    '  kpng [kube-proxy\'s flags]  run as kube-proxy would, with its command line and --config (kpng help kube-proxy)',
    '',
    'Run `kpng COMMAND --help` for the flags of one command.',
    '',
    `Backends (--to; registered: ${listBackends().map((d) => d.name).join(', ')}):`,
    ...backendsText([{ name: 'api', summary: 'serve every node\'s state over gRPC (--listen)' }]),
    '',
    'Flags of file, kube and local:',
    ...groupsText(groups, flags),
    '',
  ].join('\n');
}

/** `kpng COMMAND --help`. */
export function commandHelp(cmd: CommandSpec): string {
  return [
    `kpng ${cmd.name}: ${cmd.summary}`,
    '',
    'Usage:',
    ...cmd.usage.map((u) => `  kpng ${u}`),
    ...(cmd.about ? ['', wrap(cmd.about, 0)] : []),
    ...(cmd.groups.length ? ['', 'Flags:', ...groupsText(cmd.groups, commandFlags(cmd))] : []),
    ...(cmd.backends ? ['', `Backends (--to; registered: ${listBackends().map((d) => d.name).join(', ')}):`, ...backendsText(cmd.name === 'local' ? [] : [{ name: 'api', summary: 'serve every node\'s state over gRPC (--listen)' }])] : []),
    '',
  ].join('\n');
}

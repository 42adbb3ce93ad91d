// The backend registry: every `--to` target registers here with its name, one-line summary, its own
// flags (with help text) and a constructor, in the spirit of KPNG's backendcmd.Register. kpng's own
// backends and third-party ones (loaded with `kpng --plugin MODULE`, or registered by a program that
// uses kpng as a library) use the same contract. `kpng --help` lists what is registered.
import type { Logger } from '../util/log';
import type { Sink } from '../sink/sink';
import type { BackendFlag, FlagValue } from '../util/flag-types';

export type { BackendFlag, FlagValue };

export interface BackendContext {
  /** The node whose state this backend programs. */
  node: string;
  log: Logger;
  /** This backend's own flags, by name (defaults applied). */
  flags: Record<string, FlagValue>;
  /** Network namespace to program (tests, labs); absent: the process's own. */
  netns?: string;
}

export interface BackendDefinition {
  /** The name for `--to`. */
  name: string;
  /** One line for `kpng --help`. */
  summary: string;
  flags?: BackendFlag[];
  /** Programs the kernel: the runner requests a full resync every --sync-period. */
  kernel?: boolean;
  create(ctx: BackendContext): Sink | Promise<Sink>;
}

const registry = new Map<string, BackendDefinition>();

/** Registers a backend; a second registration of one name is an error (two plugins disagreeing). */
export function registerBackend(def: BackendDefinition): void {
  if (!/^[a-z][a-z0-9-]*$/.test(def.name)) throw new Error(`backend name ${JSON.stringify(def.name)}: lower-case letters, digits and dashes`);
  if (registry.has(def.name)) throw new Error(`backend ${JSON.stringify(def.name)} is registered twice`);
  const taken = new Map<string, { backend: string; flag: BackendFlag }>();
  for (const d of registry.values()) for (const f of d.flags ?? []) taken.set(f.name, { backend: d.name, flag: f });
  for (const f of def.flags ?? []) {
    const t = taken.get(f.name);
    // The same definition object may be shared (e.g. the aggregator's flags of the kernel backends).
    const other = t && t.flag !== f ? t.backend : undefined;
    if (other) throw new Error(`backend ${def.name}: flag --${f.name} is already defined by backend ${other}`);
  }
  registry.set(def.name, def);
}

export function getBackend(name: string): BackendDefinition | undefined {
  return registry.get(name);
}

/** Registered backends, in registration order. */
export function listBackends(): BackendDefinition[] {
  return [...registry.values()];
}

/** The --help section: one line per backend, then each backend's flags. */
export function backendsHelp(extra: Array<{ name: string; summary: string }> = []): string {
  const defs = listBackends();
  const all = [...defs, ...extra];
  const width = Math.max(...all.map((d) => d.name.length)) + 2;
  const lines = all.map((d) => `  ${d.name.padEnd(width)} ${d.summary}`);
  for (const d of defs) {
    if (!d.flags?.length) continue;
    lines.push(` ${d.name}:`);
    for (const f of d.flags) {
      const left = `--${f.name}${f.type === 'string' ? ` ${f.placeholder ?? 'VALUE'}` : ''}`;
      const dflt = f.default !== undefined && f.default !== false ? ` (default ${f.default})` : '';
      lines.push(`  ${left.padEnd(22)}${left.length >= 22 ? '\n' + ' '.repeat(24) : ''}${f.help}${dflt}`);
    }
  }
  return lines.join('\n');
}

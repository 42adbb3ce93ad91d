// A flag as a backend (or another part with its own flags) declares it: parsed and shown in --help
// by the CLI, read back by name.
export type FlagValue = string | boolean | string[] | undefined;

export interface BackendFlag {
  /** Without the leading dashes, e.g. 'cgroup'. Must not collide with a core flag or another backend's. */
  name: string;
  type: 'string' | 'boolean';
  /** Repeatable (string flags): the value is a list. */
  multiple?: boolean;
  default?: string | boolean;
  /** Shown in --help after the flag, e.g. PATH. */
  placeholder?: string;
  help: string;
}

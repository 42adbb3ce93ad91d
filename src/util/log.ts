// Logging on stderr (stdout carries views such as routes and dump). Warnings about cluster
// objects are said once per object and reason, not on every resync.
export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

export interface Logger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export function createLogger(level: Level = 'info', write: (line: string) => void = (l) => process.stderr.write(l + '\n')): Logger {
  const at = (l: Level) => (msg: string) => { if (ORDER[l] >= ORDER[level]) write(`${l === 'info' ? '' : l + ': '}${msg}`); };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Remembers the last reason given for each object so a resync does not repeat a warning. */
export class ObjectWarnings {
  private readonly last = new Map<string, string>();
  constructor(private readonly log: Logger) {}

  /**
   * Warn about `kind ns/name` unless the same reason was the last one said about it. `partly`: the
   * object is kept without the named parts (otherwise it is skipped as a whole).
   */
  warn(kind: string, name: string, reason: string, partly = false): void {
    const key = `${kind} ${name}`;
    if (this.last.get(key) === reason) return;
    this.last.set(key, reason);
    this.log.warn(partly ? `${key}: ${reason}` : `skipping ${key}: ${reason}`);
  }

  /** The object is fine now (or gone): a later problem is worth saying again. */
  clear(kind: string, name: string): void {
    if (this.last.size > 0) this.last.delete(`${kind} ${name}`); // called for every object received
  }
}

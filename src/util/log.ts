// Logging on stderr (stdout carries views such as routes and dump), in the formats kube-proxy's logs
// come in, so that log pipelines built for it parse kpng's lines too:
//  - text: klog's header, `Lmmdd hh:mm:ss.uuuuuu PID SOURCE] message` (L: I, W or E; local time;
//    the pid right-aligned in 7 columns);
//  - json: component-base's JSON logger, `{"ts":<ms since the epoch>,"caller":...,"msg":...,"v":N}`,
//    errors without "v" and with "err" when an error value is given.
// klog's SOURCE is the caller's file:line. kpng writes `kpng:0` instead: the program's name in the
// file:line shape parsers expect, line 0 for "no line". A real caller would cost a stack capture per
// line and name compiled .js files, not the TypeScript a reader would open.
// Verbosity follows klog's -v: info, warnings and errors are V(0), kpng's debug messages V(4).
// Warnings about cluster objects are said once per object and reason, not on every resync.
export type Level = 'debug' | 'info' | 'warn' | 'error';
export type LogFormat = 'text' | 'json';
export const LOG_FORMATS: readonly LogFormat[] = ['text', 'json'];

/** The klog verbosity of kpng's debug messages (kube-proxy logs its per-sync details at V(4) too). */
export const DEBUG_VERBOSITY = 4;

const ORDER: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };
const SEVERITY: Record<Level, 'I' | 'W' | 'E'> = { debug: 'I', info: 'I', warn: 'W', error: 'E' };
const SOURCE = 'kpng:0';

export interface Logger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
  /** `err`: the error's message goes in its own field (`err=` in text, "err" in JSON). */
  error(msg: string, err?: unknown): void;
}

export interface LoggerOptions {
  /** text (klog's, the default) or json (component-base's). */
  format?: LogFormat;
  /** klog's -v: debug messages are written when it is 4 or more (default 0). */
  verbosity?: number;
  /** The least severe level written (default info); 'debug' is the same as verbosity 4. */
  level?: Level;
  /** Receives each line without its newline (default: stderr). */
  write?: (line: string) => void;
  /** Milliseconds since the epoch (default Date.now). */
  now?: () => number;
  /** The process id in text headers (default process.pid). */
  pid?: number;
}

const stderr = (l: string) => { process.stderr.write(l + '\n'); };
const two = (n: number) => (n < 10 ? '0' : '') + n;

/** klog's header for a message at `ms` since the epoch, in local time as klog writes it. */
function klogHeader(severity: 'I' | 'W' | 'E', ms: number, pid: number): string {
  const d = new Date(ms);
  // Date has millisecond precision: klog's microseconds end in 000.
  const micros = String(d.getMilliseconds() * 1000).padStart(6, '0');
  return `${severity}${two(d.getMonth() + 1)}${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${micros} ${String(pid).padStart(7, ' ')} ${SOURCE}] `;
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export function createLogger(level?: Level, write?: (line: string) => void): Logger;
export function createLogger(opts: LoggerOptions): Logger;
export function createLogger(a: Level | LoggerOptions = 'info', w?: (line: string) => void): Logger {
  const o: LoggerOptions = typeof a === 'string' ? { level: a, write: w } : a;
  const write = o.write ?? stderr;
  const now = o.now ?? Date.now;
  const pid = o.pid ?? process.pid;
  const level = o.level ?? 'info';
  const debug = level === 'debug' || (o.verbosity ?? 0) >= DEBUG_VERBOSITY;
  const least = level === 'debug' ? ORDER.info : ORDER[level];
  const on = (l: Level) => (l === 'debug' ? debug && least <= ORDER.info : ORDER[l] >= least);
  const line = o.format === 'json'
    ? (l: Level, msg: string, err?: unknown) => {
      const rec: Record<string, unknown> = { ts: now(), caller: SOURCE, msg };
      if (l === 'error') { if (err !== undefined) rec.err = errorText(err); } else rec.v = l === 'debug' ? DEBUG_VERBOSITY : 0;
      return JSON.stringify(rec);
    }
    : (l: Level, msg: string, err?: unknown) => `${klogHeader(SEVERITY[l], now(), pid)}${msg}${err === undefined ? '' : ` err=${JSON.stringify(errorText(err))}`}`;
  const at = (l: Level) => (on(l) ? (msg: string, err?: unknown) => write(line(l, msg, err)) : () => {});
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

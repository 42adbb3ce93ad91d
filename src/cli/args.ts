// Command-line options of `kpng`, their parsing and the --help text.
import { parseArgs } from 'node:util';
import { COMMANDS as SPECS, COMMON_FLAGS, commandFlags, commandsOf, commandSpec } from './spec';
import { parseDuration } from '../util/duration';
import os from 'node:os';
import { getBackend, listBackends, type FlagValue } from '../backend/registry';
import { modelOptions, OptionError, type ModelOptions } from '../model/options';
import { JIT_MODES, type JitMode } from '../util/jit';
import { contentTypeOf, PROTOBUF, type ContentType } from '../source/kube/protobuf';
import { DEBUG_VERBOSITY, LOG_FORMATS, type LogFormat } from '../util/log';
import type { VModule } from '../config/kube-proxy-config';

export const COMMANDS = ['file', 'kube', 'local', 'migrate-check', 'help', 'version'] as const;
const NODE_COMMANDS = SPECS.filter((c) => c.backends);
export type Command = (typeof COMMANDS)[number];
/** A registered backend's name, or 'api' (serve every node's state: not a node backend). */
export type SinkName = string;

export interface CliOptions {
  command: Command;
  node: string;
  to: SinkName;
  format: string | undefined;
  once: boolean;
  stats: boolean;
  minSyncPeriodMs: number;
  /** Undefined: changes are paced by minSyncPeriodMs too (kube-proxy's pacing). */
  minChangePeriodMs: number | undefined;
  syncBurst: number;
  /** --detect-local-mode and its flags, --masquerade-all, --nodeport-addresses, --bind-address, validated. */
  model: ModelOptions;
  /** Full resync period of kernel backends, ms. */
  syncPeriodMs: number;
  /** The chosen backend's own flags. */
  backendFlags: Record<string, FlagValue>;
  /** Modules loaded with --plugin (they register backends). */
  plugins: string[];
  serviceProxyName: string;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** --cleanup-only: what `--cleanup` removes (default both kpng's and kube-proxy's). */
  cleanupOnly: 'kpng' | 'kube-proxy' | undefined;
  /** --logging-format: klog's text (default) or component-base's JSON. */
  logFormat: LogFormat;
  /** adaptive: V8's optimizing compilers only once the cluster is large or the process busy (util/jit.ts). */
  jit: JitMode;
  input?: string;
  kubeconfig?: string;
  /** What the kube source asks the API server for (--kube-api-content-type). */
  kubeContentType: ContentType;
  api?: string;
  listen?: string;
  socketGroup?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsCA?: string;
  /** command 'help': the command (or 'kube-proxy') whose help is asked for; none: kpng's. */
  helpTopic?: string;
}

/** The options of `help` and `version`: nothing else is read. */
function helpOnly(): CliOptions {
  return {
    command: 'help', node: os.hostname(), to: 'routes', format: undefined, once: false, stats: false, minSyncPeriodMs: 1000, minChangePeriodMs: undefined, syncBurst: 2,
    model: modelOptions({}), syncPeriodMs: 3600000, backendFlags: {}, plugins: [], serviceProxyName: '', logLevel: 'info', cleanupOnly: undefined,
    logFormat: 'text', jit: 'adaptive', kubeContentType: 'protobuf',
  };
}

export class UsageError extends Error {}

/** --kube-api-content-type: kube-proxy's media types (or their short names) to the kube source's encoding. */
export function contentTypeFlag(v: string | undefined): ContentType {
  const t = v?.trim().toLowerCase() ?? '';
  if (t === '' || t === 'protobuf') return 'protobuf';
  if (t === 'json') return 'json';
  const type = contentTypeOf(t);
  if (!type) throw new UsageError(`--kube-api-content-type ${JSON.stringify(v)}: expected ${PROTOBUF} or application/json`);
  return type;
}

/** A duration flag's value ("1s", "250ms", "1m30s", "0" or a number of seconds), to milliseconds. */
export function durationFlag(text: string, what: string): number {
  const ms = parseDuration(text);
  if (ms === null) throw new UsageError(`${what}: ${JSON.stringify(text)} is not a duration (e.g. 1s, 250ms, 1m30s, 0)`);
  return ms;
}

/** Values of --plugin, read before parsing (plugins add flags). */
export function pluginArgs(argv: string[]): string[] {
  const out: string[] = [];
  argv.forEach((a, i) => {
    if (a === '--plugin' && argv[i + 1] !== undefined) out.push(argv[i + 1]);
    else if (a.startsWith('--plugin=')) out.push(a.slice('--plugin='.length));
  });
  return out;
}

/** The highest verbosity of a klog --vmodule value ("pattern=N,..."; 0 when absent). */
export function vmoduleVerbosity(text: string | undefined): number {
  return parseVModule(text ?? '').reduce((max, m) => Math.max(max, m.verbosity), 0);
}

/** klog's --vmodule text, "PATTERN=N,PATTERN=N", as the configuration's list (logging.vmodule). */
export function parseVModule(text: string): VModule[] {
  return text.split(',').map((p) => p.trim()).filter(Boolean).map((p) => {
    const m = /^([^=]+)=(\d+)$/.exec(p);
    if (!m) throw new UsageError(`--vmodule ${JSON.stringify(text)}: expected PATTERN=N, comma separated`);
    return { filePattern: m[1], verbosity: Number(m[2]) };
  });
}

const list = (v: string[] | undefined): string[] => (v ?? []).flatMap((c) => c.split(',')).map((c) => c.trim()).filter(Boolean);

export function parseCli(argv: string[]): CliOptions {
  const backendOptions: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const d of listBackends()) for (const f of d.flags ?? []) backendOptions[f.name] = { type: f.type, ...(f.multiple ? { multiple: true } : {}) };
  // Every flag of the commands that run a backend (file, kube, local), then each is checked against its command.
  const own: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {};
  for (const f of [...NODE_COMMANDS.flatMap(commandFlags), ...COMMON_FLAGS]) own[f.name] = { type: f.type, ...(f.multiple ? { multiple: true } : {}), ...(f.short ? { short: f.short } : {}) };
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { ...backendOptions, ...own } });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  // Typed by the declarations: string flags hold strings (lists when repeatable), boolean ones booleans.
  const v = parsed.values as Record<string, string | undefined> & Record<`${'cluster-cidr' | 'nodeport-addresses' | 'plugin'}`, string[] | undefined> & Record<`${'help' | 'version' | 'once' | 'stats' | 'masquerade-all'}`, boolean | undefined>;
  const first = parsed.positionals[0];
  const spec = first === undefined ? undefined : commandSpec(first);
  if (first !== undefined && (!spec || !COMMANDS.includes(first as Command))) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
  // `kpng COMMAND --help` is the command's help; `kpng help COMMAND` too.
  if (v.help || first === 'help' || (first === undefined && !v.version)) {
    const topic = v.help ? first : parsed.positionals[1];
    if (topic !== undefined && topic !== 'kube-proxy' && !commandSpec(topic)) throw new UsageError(`help ${JSON.stringify(topic)}: no such command (${SPECS.map((c) => c.name).join(', ')}, kube-proxy)`);
    return { ...helpOnly(), helpTopic: topic };
  }
  const command: Command = v.version ? 'version' : (first as Command);
  if (parsed.positionals.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[1])}`);
  if (command === 'version') return { ...helpOnly(), command };
  const accepted = new Set(commandFlags(spec!).map((f) => f.name));
  for (const name of Object.keys(v)) {
    if (name in backendOptions || COMMON_FLAGS.some((f) => f.name === name) || accepted.has(name)) continue;
    throw new UsageError(`--${name} does not apply to kpng ${command} (it is a flag of kpng ${commandsOf(name).join(', ')})`);
  }
  const to = (v.to ?? 'routes') as SinkName;
  const def = getBackend(to);
  if (!def && to !== 'api') throw new UsageError(`--to ${JSON.stringify(v.to)}: expected one of ${[...listBackends().map((d) => d.name), 'api'].join(', ')}`);
  const values = v as Record<string, FlagValue>;
  const backendFlags: Record<string, FlagValue> = { format: v.format };
  for (const d of listBackends()) {
    for (const f of d.flags ?? []) {
      if (d === def) backendFlags[f.name] = values[f.name] ?? f.default;
      else if (values[f.name] !== undefined && !def?.flags?.some((g) => g.name === f.name)) throw new UsageError(`--${f.name} applies to --to ${d.name}, not --to ${to}`);
    }
  }
  let model: ModelOptions;
  try {
    model = modelOptions({
      clusterCIDRs: list(v['cluster-cidr']), masqueradeAll: !!v['masquerade-all'], nodePortAddresses: list(v['nodeport-addresses']),
      detectLocalMode: v['detect-local-mode'], podBridgeInterface: v['pod-bridge-interface'], podInterfaceNamePrefix: v['pod-interface-name-prefix'],
      bindAddress: v['bind-address'], localhostNodePorts: !!v['localhost-nodeports'],
    });
  } catch (e) {
    if (e instanceof OptionError) throw new UsageError(e.message);
    throw e;
  }
  const formats: Record<string, string[]> = { routes: ['table', 'jsonl'], dump: ['json', 'yaml'] };
  if (v.format !== undefined && !(formats[to] ?? []).includes(v.format)) {
    throw new UsageError(`--format ${JSON.stringify(v.format)} does not apply to --to ${to}${formats[to] ? ` (use ${formats[to].join(' or ')})` : ''}`);
  }
  const logLevel = (v['log-level'] ?? (vmoduleVerbosity(v.vmodule) >= DEBUG_VERBOSITY ? 'debug' : 'info')) as CliOptions['logLevel'];
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel)) throw new UsageError(`--log-level ${JSON.stringify(logLevel)}: expected debug, info, warn or error`);
  const logFormat = (v['logging-format'] ?? 'text') as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) throw new UsageError(`--logging-format ${JSON.stringify(v['logging-format'])}: expected ${LOG_FORMATS.join(' or ')}`);
  const jit = (v.jit ?? 'adaptive') as JitMode;
  if (!JIT_MODES.includes(jit)) throw new UsageError(`--jit ${JSON.stringify(v.jit)}: expected ${JIT_MODES.join(' or ')}`);
  const burst = Number(v['sync-burst'] ?? '2');
  if (!Number.isInteger(burst) || burst < 1) throw new UsageError(`--sync-burst ${JSON.stringify(v['sync-burst'])}: expected a whole number >= 1`);
  const cleanupOnly = v['cleanup-only'] as CliOptions['cleanupOnly'];
  if (cleanupOnly !== undefined && cleanupOnly !== 'kpng' && cleanupOnly !== 'kube-proxy') throw new UsageError(`--cleanup-only ${JSON.stringify(cleanupOnly)}: expected kpng or kube-proxy`);
  if (command === 'file' && !v.input) throw new UsageError('kpng file needs --input FILE');
  if (command === 'local' && !v.api) throw new UsageError('kpng local needs --api URL');
  if (command === 'local' && to === 'api') throw new UsageError('kpng local cannot --to api');
  return {
    command,
    node: v.node ?? v['hostname-override'] ?? os.hostname(),
    to,
    format: v.format,
    once: !!v.once,
    stats: !!v.stats,
    minSyncPeriodMs: durationFlag(v['min-sync-period'] ?? '1s', '--min-sync-period'),
    minChangePeriodMs: v['min-change-period'] === undefined ? undefined : durationFlag(v['min-change-period'], '--min-change-period'),
    syncBurst: burst,
    model,
    syncPeriodMs: durationFlag(v['sync-period'] ?? '1h', '--sync-period'),
    backendFlags,
    plugins: v.plugin ?? [],
    serviceProxyName: v['service-proxy-name'] ?? '',
    cleanupOnly,
    logLevel,
    logFormat,
    jit,
    input: v.input,
    kubeconfig: v.kubeconfig,
    kubeContentType: contentTypeFlag(v['kube-api-content-type']),
    api: v.api,
    listen: v.listen,
    socketGroup: v['socket-group'],
    tlsCert: v['tls-cert'],
    tlsKey: v['tls-key'],
    tlsCA: v['tls-ca'],
  };
}

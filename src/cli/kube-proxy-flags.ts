// kube-proxy compatibility of the command line: kube-proxy's own flags (--config, --metrics-bind-address,
// --healthz-bind-address, --proxy-mode, --conntrack-*, --oom-score-adj, --bind-address-hard-fail, --v)
// are taken out of argv here; a KubeProxyConfiguration file (--config) is read and turned into the
// flags kpng's parser knows (--hostname-override, --cluster-cidr, --sync-period, --to, ...), each added
// only when the command line does not give it (flags win over the file). `kube-proxy --config F
// --hostname-override N` (a kubeadm DaemonSet's command) runs as `kpng kube ...`.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, parseKubeProxyConfiguration, type KubeProxySettings } from '../config/kube-proxy-config';
import { parseGoDuration } from '../config/duration';
import type { ConntrackSettings } from '../config/conntrack';
import { parseBindAddress } from '../util/http-serve';
import { COMMANDS, UsageError } from './args';

export const DEFAULT_METRICS_BIND_ADDRESS = '127.0.0.1:10249';
export const DEFAULT_HEALTHZ_BIND_ADDRESS = '0.0.0.0:10256';

export interface OpsOptions {
  /** null: disabled (an empty flag value, as kube-proxy). */
  metricsBindAddress: string | null;
  healthzBindAddress: string | null;
  bindAddressHardFail: boolean;
  /** null: leave the kernel's conntrack settings alone. */
  conntrack: ConntrackSettings | null;
  oomScoreAdj: number | undefined;
  configFile?: string;
}

export interface KubeProxyArgs {
  /** What kpng's own parser gets. */
  argv: string[];
  ops: OpsOptions;
  /** Warnings to log once a logger exists (ignored config fields, mode mapping). */
  warnings: string[];
}

const FLAGS = {
  config: { type: 'string' },
  'metrics-bind-address': { type: 'string' },
  'healthz-bind-address': { type: 'string' },
  'bind-address-hard-fail': { type: 'boolean' },
  'proxy-mode': { type: 'string' },
  'oom-score-adj': { type: 'string' },
  'conntrack-max-per-core': { type: 'string' },
  'conntrack-min': { type: 'string' },
  'conntrack-tcp-timeout-established': { type: 'string' },
  'conntrack-tcp-timeout-close-wait': { type: 'string' },
  'conntrack-tcp-be-liberal': { type: 'boolean' },
  'conntrack-udp-timeout': { type: 'string' },
  'conntrack-udp-timeout-stream': { type: 'string' },
  v: { type: 'string' },
} as const;
type FlagName = keyof typeof FLAGS;

export function kubeProxyFlagsHelp(): string {
  return ` kube-proxy compatibility (same names and meanings as kube-proxy's flags):
  --config FILE         a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1; also a ConfigMap
                        holding one in config.conf); flags win over it; fields kpng does not support
                        are named in one warning. Without a command, \`kpng --config F\` runs \`kpng kube\`
  --proxy-mode MODE     nftables (nft), iptables (nft: kpng has no iptables mode), ipvs, or any
                        registered backend; used when --to is not given
  --metrics-bind-address IP:PORT
                        Prometheus /metrics (default ${DEFAULT_METRICS_BIND_ADDRESS}; empty disables)
  --healthz-bind-address IP:PORT
                        /healthz and /livez (default ${DEFAULT_HEALTHZ_BIND_ADDRESS}; empty disables)
  --bind-address-hard-fail
                        exit when a metrics or healthz port cannot be bound (default: log and retry)
  --conntrack-max-per-core N, --conntrack-min N, --conntrack-tcp-timeout-established D,
  --conntrack-tcp-timeout-close-wait D, --conntrack-tcp-be-liberal, --conntrack-udp-timeout D,
  --conntrack-udp-timeout-stream D
                        conntrack sysctls, applied as kube-proxy applies them (with --config, kube-proxy's
                        defaults fill the unset ones; without, only the flags given are applied)
  --oom-score-adj N     this process's oom_score_adj (with --config: default -999, as kube-proxy)
  --v N                 log verbosity (4 and more: debug)
`;
}

const present = (argv: string[], name: string) => argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`));

/** Splits kube-proxy's flags from the rest of argv. */
function extract(argv: string[]): { rest: string[]; values: Partial<Record<FlagName, string | boolean>> } {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: FLAGS, strict: false, allowPositionals: true, tokens: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const drop = new Set<number>();
  const values: Partial<Record<FlagName, string | boolean>> = {};
  for (const t of parsed.tokens ?? []) {
    if (t.kind !== 'option' || !(t.name in FLAGS)) continue;
    const name = t.name as FlagName;
    drop.add(t.index);
    if (FLAGS[name].type === 'string') {
      if (t.value === undefined) throw new UsageError(`--${name} needs a value`);
      if (!t.inlineValue) drop.add(t.index + 1);
      values[name] = t.value;
    } else {
      // kube-proxy's boolean flags also take --flag=true / --flag=false.
      if (t.value !== undefined && t.value !== 'true' && t.value !== 'false') throw new UsageError(`--${name}=${t.value}: expected true or false`);
      values[name] = t.value !== 'false';
    }
  }
  return { rest: argv.filter((_, i) => !drop.has(i)), values };
}

function intFlag(v: string | boolean | undefined, name: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name} ${JSON.stringify(v)}: expected a whole number in [${min}, ${max}]`);
  return n;
}

function secondsFlag(v: string | boolean | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const ms = typeof v === 'string' ? parseGoDuration(v) : null;
  if (ms === null) throw new UsageError(`--${name} ${JSON.stringify(v)}: expected a duration (e.g. 24h0m0s, 1h, 30s)`);
  return Math.floor(ms / 1000);
}

/** kube-proxy's mode names to kpng backends. */
export function backendForMode(mode: string, registered: readonly string[]): { backend: string; note?: string } {
  if (mode === '' || mode === 'nftables') return { backend: 'nft' };
  if (mode === 'iptables') return { backend: 'nft', note: 'proxy mode iptables: kpng has no iptables mode; using nft (nftables, kube-proxy\'s successor to iptables)' };
  if (registered.includes(mode)) return { backend: mode };
  throw new UsageError(`proxy mode ${JSON.stringify(mode)}: no such backend here (use nftables, iptables${registered.includes('ipvs') ? ', ipvs' : ''} or one of ${registered.join(', ')})`);
}

export function resolveKubeProxyArgs(argv: string[], opts: { registered: readonly string[]; invokedAs?: string; readFile?: (file: string) => string }): KubeProxyArgs {
  const { rest, values: v } = extract(argv);
  const warnings: string[] = [];
  let cfg: KubeProxySettings | undefined;
  const configFile = typeof v.config === 'string' ? v.config : undefined;
  if (configFile !== undefined) {
    let text: string;
    try {
      text = (opts.readFile ?? ((f) => fs.readFileSync(f, 'utf8')))(configFile);
    } catch (e) {
      throw new UsageError(`--config ${configFile}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    try {
      cfg = parseKubeProxyConfiguration(text, configFile);
    } catch (e) {
      if (e instanceof ConfigError) throw new UsageError(`--config ${e.message}`);
      throw e;
    }
    if (cfg.ignored.length) warnings.push(`config ${configFile}: kpng does not support ${cfg.ignored.length === 1 ? 'this field' : `these ${cfg.ignored.length} fields`}, ignored: ${cfg.ignored.join(', ')}`);
  }

  const out = [...rest];
  // `kube-proxy --config F ...` has no command: it is the kube source.
  const asKubeProxy = opts.invokedAs !== undefined && path.basename(opts.invokedAs).startsWith('kube-proxy');
  const hasCommand = rest.some((a) => (COMMANDS as readonly string[]).includes(a) || a === '--help' || a === '-h' || a === '--version');
  if (!hasCommand && (configFile !== undefined || v['proxy-mode'] !== undefined || asKubeProxy)) out.unshift('kube');

  const add = (flag: string, value?: string, ...alsoGivenBy: string[]) => {
    if (present(out, flag) || alsoGivenBy.some((f) => present(out, f))) return;
    out.push(`--${flag}`, ...(value === undefined ? [] : [value]));
  };
  if (cfg) {
    if (cfg.hostnameOverride) add('hostname-override', cfg.hostnameOverride, 'node');
    if (cfg.clusterCIDRs?.length) add('cluster-cidr', cfg.clusterCIDRs.join(','));
    if (cfg.nodePortAddresses?.length) add('nodeport-addresses', cfg.nodePortAddresses.join(','));
    if (cfg.masqueradeAll) add('masquerade-all');
    if (cfg.syncPeriodMs !== undefined) add('sync-period', `${cfg.syncPeriodMs}ms`);
    if (cfg.minSyncPeriodMs !== undefined) add('min-sync-period', `${cfg.minSyncPeriodMs}ms`);
    if (cfg.kubeconfig) add('kubeconfig', cfg.kubeconfig);
    if (cfg.contentType) add('kube-api-content-type', cfg.contentType);
  }
  const verbosity = intFlag(v.v, 'v', 0, 1000) ?? cfg?.verbosity;
  if (verbosity !== undefined && verbosity >= 4) add('log-level', 'debug');
  const mode = typeof v['proxy-mode'] === 'string' ? v['proxy-mode'] : cfg?.mode;
  if (mode !== undefined && !present(out, 'to')) {
    const m = backendForMode(mode, opts.registered);
    if (m.note) warnings.push(m.note);
    out.push('--to', m.backend);
  }

  const bind = (flag: 'metrics-bind-address' | 'healthz-bind-address', fromFile: string | undefined, dflt: string, port: number): string | null => {
    const given = v[flag];
    const value = typeof given === 'string' ? given : fromFile || dflt;
    if (value.trim() === '') return null;
    try {
      parseBindAddress(value, port, `--${flag}`);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    return value;
  };

  let conntrack: ConntrackSettings | null = cfg ? { ...cfg.conntrack } : null;
  const ctFlags: ConntrackSettings = {
    maxPerCore: intFlag(v['conntrack-max-per-core'], 'conntrack-max-per-core', 0, 2 ** 31 - 1),
    min: intFlag(v['conntrack-min'], 'conntrack-min', 0, 2 ** 31 - 1),
    tcpEstablishedTimeout: secondsFlag(v['conntrack-tcp-timeout-established'], 'conntrack-tcp-timeout-established'),
    tcpCloseWaitTimeout: secondsFlag(v['conntrack-tcp-timeout-close-wait'], 'conntrack-tcp-timeout-close-wait'),
    tcpBeLiberal: v['conntrack-tcp-be-liberal'] === undefined ? undefined : v['conntrack-tcp-be-liberal'] === true,
    udpTimeout: secondsFlag(v['conntrack-udp-timeout'], 'conntrack-udp-timeout'),
    udpStreamTimeout: secondsFlag(v['conntrack-udp-timeout-stream'], 'conntrack-udp-timeout-stream'),
  };
  for (const [k, val] of Object.entries(ctFlags) as Array<[keyof ConntrackSettings, number | boolean | undefined]>) {
    if (val === undefined) continue;
    conntrack ??= {};
    (conntrack as Record<string, unknown>)[k] = val;
  }

  return {
    argv: out,
    ops: {
      metricsBindAddress: bind('metrics-bind-address', cfg?.metricsBindAddress, DEFAULT_METRICS_BIND_ADDRESS, 10249),
      healthzBindAddress: bind('healthz-bind-address', cfg?.healthzBindAddress, DEFAULT_HEALTHZ_BIND_ADDRESS, 10256),
      bindAddressHardFail: v['bind-address-hard-fail'] === true || (v['bind-address-hard-fail'] === undefined && !!cfg?.bindAddressHardFail),
      conntrack,
      oomScoreAdj: intFlag(v['oom-score-adj'], 'oom-score-adj', -1000, 1000) ?? cfg?.oomScoreAdj,
      configFile,
    },
    warnings,
  };
}

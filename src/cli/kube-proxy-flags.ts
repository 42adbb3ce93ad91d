// kube-proxy compatibility of the command line. Every flag of upstream kube-proxy (kube-proxy-flag-table.ts)
// is taken out of argv and read as upstream reads it: the flags and a --config file make one
// KubeProxyConfiguration, where the file wins over the flags of the same settings (except logging flags
// and --hostname-override), upstream's defaults fill the rest, and the result becomes the flags kpng's
// own parser knows (--hostname-override, --cluster-cidr, --to, ...) plus the settings around the
// pipeline (ops servers, conntrack, logging, API client). kpng's own flags (--to, --sync-period, --node,
// ...) always win. `kube-proxy --config F --hostname-override N` (a kubeadm DaemonSet's command) runs as
// `kpng kube ... --to nft`.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, kubeProxySettings, modeSection, readKubeProxyConfiguration, type KubeProxySettings, type VModule } from '../config/kube-proxy-config';
import { goDurationString } from '../util/duration';
import { masqueradeSection, setAt, writtenForm, type Obj } from '../config/kube-proxy-schema';
import type { ConntrackSettings } from '../config/conntrack';
import { parseBindAddress } from '../util/http-serve';
import { COMMANDS, parseVModule, UsageError } from './args';
import { extractGoFlags, GoFlagError, type GoFlagValue } from './go-flags';
import { KUBE_PROXY_FLAGS, type KubeProxyFlag } from './kube-proxy-flag-table';

export const DEFAULT_METRICS_BIND_ADDRESS = '127.0.0.1:10249';
export const DEFAULT_HEALTHZ_BIND_ADDRESS = '0.0.0.0:10256';

export interface OpsOptions {
  /** null: disabled (an empty flag value). */
  metricsBindAddress: string | null;
  healthzBindAddress: string | null;
  bindAddressHardFail: boolean;
  /** null: leave the kernel's conntrack settings alone. */
  conntrack: ConntrackSettings | null;
  oomScoreAdj: number | undefined;
  configFile?: string;
}

export interface LoggingOptions { format: 'text' | 'json'; verbosity: number; vmodule: VModule[] }

/** What to do instead of running the proxy. */
export type KubeProxyAction = 'run' | 'cleanup' | 'init-only' | 'write-config' | 'version-raw';

export interface KubeProxyArgs {
  /** What kpng's own parser gets. */
  argv: string[];
  action: KubeProxyAction;
  ops: OpsOptions;
  logging: LoggingOptions;
  /** The API client: --master overrides the kubeconfig's server; qps 0 means no limit. */
  kube: { master?: string; qps: number; burst: number };
  /** IPVS settings (applied by the IPVS backend). */
  ipvs: KubeProxySettings['ipvs'];
  /** The configuration in effect (KubeProxyConfiguration), for /configz and --write-config-to. */
  configuration: Obj;
  /** Read as kube-proxy's invocation (no kpng command, or a --config file): upstream's defaults apply. */
  kubeProxyStyle: boolean;
  writeConfigTo?: string;
  /** Warnings to log once a logger exists (settings with no effect, flags the file overrides, mode mapping). */
  warnings: string[];
}

export function kubeProxyFlagsHelp(): string {
  const rows = KUBE_PROXY_FLAGS.filter((f) => f.name !== 'help' && f.name !== 'healthz-port' && f.name !== 'metrics-port').map((f) => {
    const name = `${f.short && f.short !== f.name ? `-${f.short}, ` : ''}--${f.name}${f.arg ? ` ${f.arg}` : ''}`;
    return name.length <= 36 ? `  ${name.padEnd(36)}${f.help}` : `  ${name}\n  ${''.padEnd(36)}${f.help}`;
  });
  return ` kube-proxy's flags (every flag of kube-proxy v1.37 is accepted; with --config, the file wins over the flags
 of the same settings, as in kube-proxy). Without a command, kpng runs \`kpng kube\` with the backend of the mode:
${rows.join('\n')}
`;
}

/** kube-proxy's mode names to kpng backends. */
export function backendForMode(mode: string, registered: readonly string[]): { backend: string; note?: string } {
  if (mode === 'nftables') return { backend: 'nft' };
  const asIptables = 'kpng runs its nftables backend (nft) and serves node ports as iptables mode does (on every local address unless nodePortAddresses is set, '
    + 'and on 127.0.0.1 unless iptables.localhostNodePorts is false); its rules are in the nftables table "kpng", not in iptables chains (docs/migration.md)';
  if (mode === '') return { backend: 'nft', note: `proxy mode not set (kube-proxy's default on Linux is iptables): ${asIptables}` };
  if (mode === 'iptables') return { backend: 'nft', note: `proxy mode iptables: ${asIptables}` };
  if (mode === 'kernelspace') throw new UsageError('proxy mode "kernelspace" is Windows only (use nftables, iptables or ipvs)');
  if (registered.includes(mode)) return { backend: mode };
  throw new UsageError(`proxy mode ${JSON.stringify(mode)}: no such mode (use nftables, iptables${registered.includes('ipvs') ? ', ipvs' : ''} or one of kpng's backends: ${registered.join(', ')})`);
}

const present = (argv: string[], name: string) => argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`));

/** A flag's value as the configuration holds it. */
function configValue(f: KubeProxyFlag, v: GoFlagValue): unknown {
  if (f.type === 'duration') return goDurationString(v as number);
  if (f.name === 'vmodule') return parseVModule(v as string);
  if (f.name === 'cluster-cidr') return (v as string[]).filter(Boolean).join(',');
  // Upstream's processHostnameOverrideFlag: trimmed and lower-cased.
  if (f.name === 'hostname-override') return (v as string).trim().toLowerCase();
  return v;
}

/** --metrics-port / --healthz-port: the port of the default address (upstream's deprecated flags; 0 disables). */
function withPort(address: string, port: number): string | null {
  if (port === 0) return null;
  const i = address.lastIndexOf(':');
  return `${address.slice(0, i)}:${port}`;
}

export function resolveKubeProxyArgs(argv: string[], opts: { registered: readonly string[]; invokedAs?: string; readFile?: (file: string) => string }): KubeProxyArgs {
  let given: Map<string, GoFlagValue>;
  let rest: string[];
  try {
    ({ rest, values: given } = extractGoFlags(argv, KUBE_PROXY_FLAGS));
  } catch (e) {
    if (e instanceof GoFlagError) throw new UsageError(e.message);
    throw e;
  }
  const byName = new Map(KUBE_PROXY_FLAGS.map((f) => [f.name, f]));
  const warnings: string[] = [];
  const configFile = given.get('config') as string | undefined;

  // The user's configuration: the file, or the flags (upstream ignores configuration flags with a file).
  let user: Obj = {};
  const overridden: string[] = [];
  const fromFlag = new Map<string, string>(); // configuration path -> the flag that set it
  if (configFile !== undefined) {
    let text: string;
    try {
      text = (opts.readFile ?? ((f) => fs.readFileSync(f, 'utf8')))(configFile);
    } catch (e) {
      throw new UsageError(`--config ${configFile}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    try {
      const read = readKubeProxyConfiguration(text, configFile);
      user = read.user;
      if (read.unknown.length) warnings.push(`config ${configFile}: unknown field${read.unknown.length > 1 ? 's' : ''} ignored (not in ${'kubeproxy.config.k8s.io/v1alpha1'}): ${read.unknown.join(', ')}`);
    } catch (e) {
      if (e instanceof ConfigError) throw new UsageError(`--config ${e.message}`);
      throw e;
    }
  }
  const mode = configFile !== undefined ? (typeof user.mode === 'string' ? user.mode : '') : ((given.get('proxy-mode') as string | undefined) ?? '');
  for (const [name, v] of given) {
    const f = byName.get(name)!;
    if (f.when === 'noConfig' && configFile !== undefined) { overridden.push(`--${name}`); continue; }
    if (!f.path) continue;
    const p = f.path.replace('{section}', masqueradeSection(mode));
    setAt(user, p, configValue(f, v));
    fromFlag.set(p, `--${name}`);
  }
  const noEffect: string[] = [];
  for (const name of given.keys()) {
    const f = byName.get(name)!;
    if (!f.noEffect || (f.when === 'noConfig' && configFile !== undefined)) continue;
    const gates = name === 'feature-gates' ? ` ${Object.keys(given.get(name) as object).join(',')}` : '';
    noEffect.push(`--${name}${gates} (${f.noEffect})`);
  }
  if (configFile === undefined) {
    // Upstream's v1alpha1 flags that land in the mode's section.
    const ipvs = mode === 'ipvs';
    for (const [flag, key] of [['iptables-sync-period', 'syncPeriod'], ['iptables-min-sync-period', 'minSyncPeriod'], ['ipvs-sync-period', 'syncPeriod'], ['ipvs-min-sync-period', 'minSyncPeriod']] as const) {
      const v = given.get(flag);
      if (v === undefined) continue;
      if (flag.startsWith('ipvs') !== ipvs) { noEffect.push(`--${flag} (mode ${mode || 'iptables'} does not read it, as in kube-proxy)`); continue; }
      setAt(user, `${modeSection(mode)}.${key}`, goDurationString(v as number));
      fromFlag.set(`${modeSection(mode)}.${key}`, `--${flag}`);
    }
    if (given.has('iptables-localhost-nodeports') && modeSection(mode) !== 'iptables') noEffect.push(`--iptables-localhost-nodeports (mode ${mode} does not read it, as in kube-proxy)`);
  }
  // Without a file, upstream fills the server addresses from the default bind address before it reads
  // --bind-address: an IPv6 --bind-address does not move them (a file's bindAddress does).
  if (configFile === undefined && given.has('bind-address')) {
    if (!given.has('healthz-bind-address')) setAt(user, 'healthzBindAddress', DEFAULT_HEALTHZ_BIND_ADDRESS);
    if (!given.has('metrics-bind-address')) setAt(user, 'metricsBindAddress', DEFAULT_METRICS_BIND_ADDRESS);
  }
  if (overridden.length) warnings.push(`--config ${configFile} is given: as kube-proxy does, kpng takes these settings from the file and ignores the flags ${overridden.join(', ')}`);

  let s: KubeProxySettings;
  try {
    s = kubeProxySettings(user);
  } catch (e) {
    if (e instanceof ConfigError) {
      // Name the flag when a flag set the field, the file's path otherwise.
      const field = e.message.split(':')[0];
      const flag = fromFlag.get(field);
      throw new UsageError(flag ? `${flag}: ${e.message.slice(field.length + 2)}` : configFile !== undefined ? `--config ${configFile}: ${e.message}` : e.message);
    }
    throw e;
  }
  // Fields of the file with no effect (the flags that set such fields are named above).
  for (const u of s.unsupported) {
    const p = u.split(' ')[0];
    if (!fromFlag.has(p) && !(p.startsWith('featureGates.') && fromFlag.has('featureGates'))) noEffect.push(u);
  }

  // How the command line is to be read: kube-proxy's way when no kpng command is given.
  const command = rest.find((a) => (COMMANDS as readonly string[]).includes(a));
  const help = given.get('help') === true;
  const versionFlag = given.get('version');
  const version = versionFlag === undefined || versionFlag === 'false' ? undefined : versionFlag === 'raw' ? 'raw' : 'text';
  const asKubeProxy = opts.invokedAs !== undefined && path.basename(opts.invokedAs).startsWith('kube-proxy');
  const kubeProxyStyle = command === undefined && !help && version === undefined && (argv.length > 0 || asKubeProxy);
  // migrate-check reads the command line as kube-proxy would: it says what kpng makes of it.
  const defaultsApply = kubeProxyStyle || configFile !== undefined || command === 'migrate-check';

  // --help after a command is that command's help.
  const out = help ? (command !== undefined ? [command, '--help'] : ['help']) : version !== undefined ? ['version'] : [...rest];
  if (kubeProxyStyle) out.unshift('kube');

  const add = (flag: string, value?: string) => {
    if (present(out, flag)) return;
    out.push(`--${flag}`, ...(value === undefined ? [] : [value]));
  };
  if (s.hostnameOverride && !present(out, 'node')) add('hostname-override', s.hostnameOverride);
  if (s.clusterCIDRs.length) add('cluster-cidr', s.clusterCIDRs.join(','));
  // iptables mode answers on every local address when nodePortAddresses is empty (nftables mode: the
  // primary ones, kpng's default), and on 127.0.0.1 with localhostNodePorts.
  // Only where kube-proxy's defaults apply (its invocation, a config file, migrate-check): a kpng
  // command keeps kpng's own defaults.
  const modeApplies = defaultsApply;
  if (s.nodePortAddresses.length) add('nodeport-addresses', s.nodePortAddresses.join(','));
  else if (modeApplies && modeSection(s.modeGiven) === 'iptables') add('nodeport-addresses', 'all');
  if (modeApplies && s.localhostNodePorts) add('localhost-nodeports');
  if (s.masqueradeAll) add('masquerade-all');
  if (s.detectLocalMode !== 'ClusterCIDR') add('detect-local-mode', s.detectLocalMode);
  if (s.podBridgeInterface) add('pod-bridge-interface', s.podBridgeInterface);
  if (s.podInterfaceNamePrefix) add('pod-interface-name-prefix', s.podInterfaceNamePrefix);
  if (s.bindAddress) add('bind-address', s.bindAddress);
  if (s.syncPeriodMs !== undefined) add('sync-period', `${s.syncPeriodMs}ms`);
  if (s.minSyncPeriodMs !== undefined) add('min-sync-period', `${s.minSyncPeriodMs}ms`);
  // The API server's connection is the kube source's: a config file's is read only by it (`kpng file
  // --config` takes the rest of the file); the flags given are passed on (another command refuses them).
  const watchesApi = kubeProxyStyle || command === 'kube';
  if (s.kubeconfig && (watchesApi || given.has('kubeconfig'))) add('kubeconfig', s.kubeconfig);
  if (given.has('kube-api-content-type') || (watchesApi && configFile !== undefined && s.contentType)) add('kube-api-content-type', s.contentType);
  // kpng's debug messages are klog's V(4).
  if (s.logging.verbosity >= 4) add('log-level', 'debug');
  if (s.logging.format !== 'text') add('logging-format', s.logging.format);
  if (s.logging.vmodule.length) add('vmodule', s.logging.vmodule.map((m) => `${m.filePattern}=${m.verbosity}`).join(','));

  // The backend: kpng's --to wins; otherwise the mode, when the invocation is kube-proxy's.
  let backend = '';
  const toIndex = out.findIndex((a) => a === '--to' || a.startsWith('--to='));
  if (toIndex >= 0) backend = out[toIndex] === '--to' ? out[toIndex + 1] ?? '' : out[toIndex].slice(5);
  else if (!help && version === undefined && (defaultsApply || given.has('proxy-mode'))) {
    const m = backendForMode(s.modeGiven, opts.registered);
    if (m.note && given.get('cleanup') !== true && given.get('write-config-to') === undefined) warnings.push(m.note);
    backend = m.backend;
    out.push('--to', backend);
  }
  const ipvs = backend === 'ipvs';
  if (ipvs) {
    // kube-proxy's IPVS settings become the ipvs backend's flags of the same names (src/backend/ipvs/settings.ts).
    if (s.ipvs.scheduler) add('ipvs-scheduler', s.ipvs.scheduler);
    if (s.ipvs.strictARP) add('ipvs-strict-arp');
    for (const [flag, ms] of [['ipvs-tcp-timeout', s.ipvs.tcpTimeoutMs], ['ipvs-tcpfin-timeout', s.ipvs.tcpFinTimeoutMs], ['ipvs-udp-timeout', s.ipvs.udpTimeoutMs]] as const) {
      if (ms > 0) add(flag, `${ms}ms`);
    }
    if (s.ipvs.excludeCIDRs.length) add('ipvs-exclude-cidrs', s.ipvs.excludeCIDRs.join(','));
  }
  // kpng's fast path: the nft backend's flags (the eBPF and IPVS backends have no flowtable yet).
  if (s.nftFlowtable.interfaces.length) {
    if (backend === 'nft') {
      add('nft-flowtable', s.nftFlowtable.interfaces.join(','));
      if (s.nftFlowtable.packetThreshold !== undefined) add('nft-flowtable-packets', String(s.nftFlowtable.packetThreshold));
    } else noEffect.push(`nftables.flowtable (only the nft backend has the fast path; the backend is ${backend || 'none'})`);
  }
  // IPVS settings: read in mode ipvs only, as upstream.
  const ipvsFields: Array<[string, boolean]> = [['ipvs.strictARP', s.ipvs.strictARP], ['ipvs.excludeCIDRs', s.ipvs.excludeCIDRs.length > 0], ['ipvs.tcpTimeout', s.ipvs.tcpTimeoutMs > 0],
    ['ipvs.tcpFinTimeout', s.ipvs.tcpFinTimeoutMs > 0], ['ipvs.udpTimeout', s.ipvs.udpTimeoutMs > 0], ['ipvs.scheduler', !!s.ipvs.scheduler]];
  for (const [field, set] of ipvsFields) {
    const flag = fromFlag.get(field);
    if (!ipvs && (flag || set)) noEffect.push(`${flag ?? field} (only the ipvs mode reads it)`);
  }
  if (noEffect.length) warnings.push(`no effect in kpng (accepted for kube-proxy compatibility): ${noEffect.join(', ')}`);

  // Servers: kpng's extension of an empty flag value (disabled) survives defaulting.
  const server = (flag: 'metrics-bind-address' | 'healthz-bind-address', portFlag: 'metrics-port' | 'healthz-port', value: string, port: number): string | null => {
    let v: string | null = value;
    if (configFile === undefined) {
      const g = given.get(flag);
      if (typeof g === 'string' && g.trim() === '') v = null;
      const p = given.get(portFlag);
      if (v !== null && typeof p === 'number') v = withPort(v, p);
    }
    if (v === null) return null;
    try {
      parseBindAddress(v, port, configFile !== undefined && !fromFlag.has(flag) ? `--config ${configFile}: ${flag === 'metrics-bind-address' ? 'metricsBindAddress' : 'healthzBindAddress'}` : `--${flag}`);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    return v;
  };

  // Without --config and with a kpng command, only the conntrack settings given are applied.
  let conntrack: ConntrackSettings | null = null;
  if (defaultsApply) conntrack = s.conntrack;
  else {
    const keys: Array<[string, keyof ConntrackSettings]> = [['conntrack-max-per-core', 'maxPerCore'], ['conntrack-min', 'min'], ['conntrack-tcp-timeout-established', 'tcpEstablishedTimeout'],
      ['conntrack-tcp-timeout-close-wait', 'tcpCloseWaitTimeout'], ['conntrack-tcp-be-liberal', 'tcpBeLiberal'], ['conntrack-udp-timeout', 'udpTimeout'], ['conntrack-udp-timeout-stream', 'udpStreamTimeout']];
    for (const [flag, key] of keys) {
      if (!given.has(flag)) continue;
      conntrack ??= {};
      (conntrack as Record<string, unknown>)[key] = s.conntrack[key];
    }
  }
  if (given.has('oom-score-adj') && configFile === undefined && (s.oomScoreAdj < -1000 || s.oomScoreAdj > 1000)) throw new UsageError(`--oom-score-adj ${s.oomScoreAdj}: expected a whole number in [-1000, 1000]`);

  const action: KubeProxyAction = given.get('write-config-to') !== undefined ? 'write-config' : version === 'raw' ? 'version-raw' : given.get('cleanup') === true ? 'cleanup' : given.get('init-only') === true ? 'init-only' : 'run';
  const master = given.get('master') as string | undefined;
  if (master !== undefined && master !== '') {
    try { new URL(master); } catch { throw new UsageError(`--master ${JSON.stringify(master)}: not a URL (e.g. https://10.0.0.1:6443)`); }
  }
  // Without a file, upstream starts from the defaults of its default mode (iptables: minimum sync 1s)
  // and only then reads --proxy-mode: an ipvs configuration so made shows that minimum.
  const configuration = writtenForm(s.effective);
  if (configFile === undefined && modeSection(s.modeGiven) === 'ipvs' && !given.has('ipvs-min-sync-period')) setAt(configuration, 'ipvs.minSyncPeriod', '1s');
  return {
    argv: out,
    action,
    ops: {
      metricsBindAddress: server('metrics-bind-address', 'metrics-port', s.metricsBindAddress || DEFAULT_METRICS_BIND_ADDRESS, 10249),
      healthzBindAddress: server('healthz-bind-address', 'healthz-port', s.healthzBindAddress || DEFAULT_HEALTHZ_BIND_ADDRESS, 10256),
      bindAddressHardFail: s.bindAddressHardFail,
      conntrack,
      oomScoreAdj: defaultsApply || given.has('oom-score-adj') ? s.oomScoreAdj : undefined,
      configFile,
    },
    logging: { format: s.logging.format as LoggingOptions['format'], verbosity: s.logging.verbosity, vmodule: s.logging.vmodule },
    kube: { master: master || undefined, qps: s.qps, burst: s.burst },
    ipvs: s.ipvs,
    configuration,
    kubeProxyStyle: defaultsApply,
    writeConfigTo: given.get('write-config-to') as string | undefined,
    warnings,
  };
}

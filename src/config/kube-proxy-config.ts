// kube-proxy's configuration (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1): read from a file
// (the document itself, or a ConfigMap holding it in config.conf as kubeadm's does), defaulted as
// upstream defaults it, and turned into the settings kpng acts on. Settings that mean nothing for kpng are
// collected in `unsupported` (only when set to something other than upstream's default), fields the
// format does not have in `unknown`, both by path.
import { yaml } from '../util/lazy-yaml';
import { parseGoDuration } from '../util/duration';
import type { ConntrackSettings } from './conntrack';
import { contentTypeOf, PROTOBUF } from '../source/kube/protobuf';
import { API_VERSION, at, checkShape, ConfigError, defaultConfiguration, isObj, isZero, KIND, masqueradeSection, modeSection, withDefaults, type Obj } from './kube-proxy-schema';

export { API_VERSION, ConfigError, KIND, modeSection } from './kube-proxy-schema';

export interface VModule { filePattern: string; verbosity: number }

export interface KubeProxySettings {
  /** The mode after defaulting ('iptables' when unset, as upstream on Linux). */
  mode: string;
  /** The mode as the user gave it ('' when unset). */
  modeGiven: string;
  hostnameOverride?: string;
  /** The node's primary IP when set to a specific address (0.0.0.0 and :: mean "from the Node object"). */
  bindAddress?: string;
  clusterCIDRs: string[];
  detectLocalMode: string;
  podBridgeInterface: string;
  podInterfaceNamePrefix: string;
  /** Upstream's list (keywords primary, all, localhost and CIDRs); empty: the mode's default. */
  nodePortAddresses: string[];
  masqueradeAll: boolean;
  /** IPv4 node ports also answer on 127.0.0.1: iptables.localhostNodePorts in modes iptables and '' (default true), never in others. */
  localhostNodePorts: boolean;
  /** Only when the user set them: kpng's own defaults differ in meaning (see kube-proxy-flags.ts). */
  syncPeriodMs?: number;
  minSyncPeriodMs?: number;
  metricsBindAddress: string;
  healthzBindAddress: string;
  bindAddressHardFail: boolean;
  kubeconfig: string;
  contentType: string;
  qps: number;
  burst: number;
  logging: { format: string; verbosity: number; vmodule: VModule[] };
  oomScoreAdj: number;
  conntrack: ConntrackSettings;
  ipvs: { scheduler: string; excludeCIDRs: string[]; strictARP: boolean; tcpTimeoutMs: number; tcpFinTimeoutMs: number; udpTimeoutMs: number };
  featureGates: Record<string, boolean>;
  /** kpng's fast path (nftables.flowtable): interfaces ("auto" or names; empty: off), packets before offload (undefined: the default). */
  nftFlowtable: { interfaces: string[]; packetThreshold?: number };
  /** The whole configuration after defaulting, as /configz and --write-config-to show it. */
  effective: Obj;
  /** Set fields with no effect in kpng, by path, each with the reason. */
  unsupported: string[];
}

/** Finds the KubeProxyConfiguration in a file: the document itself, or a ConfigMap's config.conf. */
function configDocument(text: string, source: string): Obj {
  let docs: unknown[];
  try {
    docs = yaml().parseAllDocuments(text).map((d) => {
      if (d.errors.length) throw new Error(d.errors[0].message);
      return d.toJS() as unknown;
    }).filter((d) => d !== null && d !== undefined);
  } catch (e) {
    throw new ConfigError(`${source}: not YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  for (const d of docs) {
    if (!isObj(d)) continue;
    if (d.kind === KIND) return d;
    if (d.kind === 'ConfigMap' && isObj(d.data)) {
      const data = d.data;
      const key = typeof data['config.conf'] === 'string' ? 'config.conf' : Object.keys(data).find((k) => typeof data[k] === 'string' && (data[k] as string).includes(KIND));
      if (key) return configDocument(data[key] as string, `${source} (ConfigMap key ${key})`);
    }
  }
  throw new ConfigError(`${source}: no ${KIND} found (expected apiVersion: ${API_VERSION}, kind: ${KIND}, or a ConfigMap holding one in config.conf)`);
}

/** The user's document, type-checked, and the paths of the fields the format does not have. */
export function readKubeProxyConfiguration(text: string, source = 'config'): { user: Obj; unknown: string[] } {
  const doc = configDocument(text, source);
  if (doc.apiVersion !== API_VERSION) throw new ConfigError(`${source}: apiVersion ${JSON.stringify(doc.apiVersion)} is not supported (expected ${API_VERSION})`);
  let unknown: string[];
  try {
    unknown = checkShape(doc);
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(`${source}: ${e.message}`);
    throw e;
  }
  return { user: doc, unknown };
}

const ms = (v: unknown): number => (typeof v === 'string' ? parseGoDuration(v) ?? 0 : 0);
const seconds = (v: unknown): number | undefined => { const n = Math.floor(ms(v) / 1000); return n > 0 ? n : undefined; };
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown, d = 0): number => (typeof v === 'number' ? v : d);

/** nftables.flowtable, checked: interface names or ["auto"], a packet count >= 0. */
function flowtable(user: Obj): KubeProxySettings['nftFlowtable'] {
  const interfaces = ((at(user, 'nftables.flowtable.interfaces') as string[] | null | undefined) ?? []).map((s) => s.trim()).filter(Boolean);
  if (interfaces.includes('auto') && interfaces.length > 1) throw new ConfigError('nftables.flowtable.interfaces: "auto" stands alone (it means every interface that can forward)');
  const n = at(user, 'nftables.flowtable.packetThreshold');
  if (typeof n === 'number' && n < 0) throw new ConfigError(`nftables.flowtable.packetThreshold: ${n} must be >= 0`);
  return { interfaces, ...(typeof n === 'number' ? { packetThreshold: n } : {}) };
}

/** Turns the user's configuration (file and/or flags, upstream's v1alpha1 shape) into kpng's settings. */
export function kubeProxySettings(user: Obj): KubeProxySettings {
  const eff = withDefaults(user);
  const unsupported: string[] = [];
  const dflt = defaultConfiguration();
  // Reported when the user set it to something other than upstream's default.
  const noEffect = (path: string, why: string) => {
    const u = at(user, path);
    if (u === undefined || u === null || isZero(u)) return;
    if (JSON.stringify(u) === JSON.stringify(at(dflt, path))) return;
    unsupported.push(`${path} (${why})`);
  };

  const modeGiven = str(user.mode);
  const mode = str(eff.mode);
  const section = modeSection(modeGiven);
  const sec = (k: string) => at(user, `${section}.${k}`);

  const contentType = str(at(user, 'clientConnection.contentType'));
  // kube-proxy's client speaks these two; anything else is a mistake worth stopping on.
  if (contentType && !contentTypeOf(contentType)) {
    throw new ConfigError(`clientConnection.contentType: ${JSON.stringify(contentType)} is not ${PROTOBUF} or application/json`);
  }
  const qps = num(at(eff, 'clientConnection.qps'), 5);
  const burst = num(at(eff, 'clientConnection.burst'), 10);
  if (qps < 0) throw new ConfigError(`clientConnection.qps: ${qps} must be >= 0`);
  if (burst < 0) throw new ConfigError(`clientConnection.burst: ${burst} must be >= 0`);

  const format = str(at(eff, 'logging.format')) || 'text';
  if (format !== 'text' && format !== 'json') throw new ConfigError(`logging.format: ${JSON.stringify(format)}: expected text or json`);
  const verbosity = num(at(eff, 'logging.verbosity'));
  if (verbosity < 0) throw new ConfigError(`logging.verbosity: ${verbosity} must be >= 0`);
  const vmodule = (at(eff, 'logging.vmodule') as VModule[] | undefined) ?? [];

  noEffect('clientConnection.acceptContentTypes', 'kpng asks for the content type alone');
  noEffect('logging.flushFrequency', 'kpng writes each log line at once');
  noEffect('logging.options', 'kpng writes every log line to stderr');
  noEffect('enableProfiling', 'kpng serves no pprof handler');
  noEffect('showHiddenMetricsForVersion', 'kpng hides no metric');
  noEffect('configSyncPeriod', 'kpng\'s watches do not resync');
  noEffect('portRange', 'not used by upstream on Linux either');
  noEffect('winkernel', 'Windows only');
  noEffect('windowsRunAsService', 'Windows only');
  noEffect(`${masqueradeSection(modeGiven)}.masqueradeBit`, 'kpng marks packets its own way');
  for (const g of Object.keys(isObj(user.featureGates) ? user.featureGates : {})) unsupported.push(`featureGates.${g} (kpng has no feature gates)`);

  const conntrack: ConntrackSettings = {
    maxPerCore: num(at(eff, 'conntrack.maxPerCore')),
    min: num(at(eff, 'conntrack.min')),
    tcpEstablishedTimeout: seconds(at(eff, 'conntrack.tcpEstablishedTimeout')),
    tcpCloseWaitTimeout: seconds(at(eff, 'conntrack.tcpCloseWaitTimeout')),
    tcpBeLiberal: at(eff, 'conntrack.tcpBeLiberal') === true,
    udpTimeout: seconds(at(eff, 'conntrack.udpTimeout')),
    udpStreamTimeout: seconds(at(eff, 'conntrack.udpStreamTimeout')),
  };
  const oomScoreAdj = num(eff.oomScoreAdj, -999);
  if (oomScoreAdj < -1000 || oomScoreAdj > 1000) throw new ConfigError(`oomScoreAdj: ${oomScoreAdj} must be in [-1000, 1000]`);

  const bind = str(eff.bindAddress).trim();
  const cidr = str(user.clusterCIDR);
  const host = str(user.hostnameOverride).trim().toLowerCase();
  const syncPeriodMs = ms(sec('syncPeriod')) || undefined;
  const minSyncPeriodMs = ms(sec('minSyncPeriod')) || undefined;
  return {
    mode,
    modeGiven,
    hostnameOverride: host || undefined,
    bindAddress: bind === '' || bind === '0.0.0.0' || bind === '::' ? undefined : bind,
    clusterCIDRs: cidr ? cidr.split(',').map((c) => c.trim()).filter(Boolean) : [],
    detectLocalMode: str(eff.detectLocalMode),
    podBridgeInterface: str(at(eff, 'detectLocal.bridgeInterface')),
    podInterfaceNamePrefix: str(at(eff, 'detectLocal.interfaceNamePrefix')),
    nodePortAddresses: ((user.nodePortAddresses as string[] | null | undefined) ?? []).map((s) => s.trim()).filter(Boolean),
    masqueradeAll: at(user, `${masqueradeSection(modeGiven)}.masqueradeAll`) === true,
    localhostNodePorts: section === 'iptables' && at(eff, 'iptables.localhostNodePorts') !== false,
    syncPeriodMs,
    minSyncPeriodMs,
    metricsBindAddress: str(eff.metricsBindAddress),
    healthzBindAddress: str(eff.healthzBindAddress),
    bindAddressHardFail: eff.bindAddressHardFail === true,
    kubeconfig: str(at(eff, 'clientConnection.kubeconfig')),
    contentType: str(at(eff, 'clientConnection.contentType')),
    qps,
    burst,
    logging: { format, verbosity, vmodule },
    oomScoreAdj,
    conntrack,
    ipvs: {
      scheduler: str(at(eff, 'ipvs.scheduler')),
      excludeCIDRs: (at(eff, 'ipvs.excludeCIDRs') as string[] | null) ?? [],
      strictARP: at(eff, 'ipvs.strictARP') === true,
      tcpTimeoutMs: ms(at(eff, 'ipvs.tcpTimeout')),
      tcpFinTimeoutMs: ms(at(eff, 'ipvs.tcpFinTimeout')),
      udpTimeoutMs: ms(at(eff, 'ipvs.udpTimeout')),
    },
    featureGates: (eff.featureGates as Record<string, boolean>) ?? {},
    nftFlowtable: flowtable(user),
    effective: eff,
    unsupported,
  };
}

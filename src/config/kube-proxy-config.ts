// kube-proxy's configuration file (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1), as the
// kube-proxy ConfigMap of a kubeadm cluster holds it (its config.conf key), read into the settings kpng
// honours. Unset and zero fields take kube-proxy's defaults; a field kpng does not support is collected in
// `ignored` (only when it is set to something: kubeadm writes every field, mostly zeros); a field of the
// wrong type is an error naming it. Sections of proxy modes other than the chosen one are not read, as
// kube-proxy does not read them.
import { yaml } from '../util/lazy-yaml';
import { parseGoDuration } from './duration';
import { KUBE_PROXY_CONNTRACK_DEFAULTS, type ConntrackSettings } from './conntrack';
import { contentTypeOf, PROTOBUF } from '../source/kube/protobuf';

export const API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const KIND = 'KubeProxyConfiguration';

export class ConfigError extends Error {}

export interface KubeProxySettings {
  hostnameOverride?: string;
  clusterCIDRs?: string[];
  /** kpng syntax: ['primary'] or CIDRs. */
  nodePortAddresses?: string[];
  masqueradeAll?: boolean;
  syncPeriodMs?: number;
  minSyncPeriodMs?: number;
  metricsBindAddress?: string;
  healthzBindAddress?: string;
  bindAddressHardFail?: boolean;
  /** The proxy mode as written ('' = kube-proxy's default). */
  mode: string;
  kubeconfig?: string;
  /** clientConnection.contentType (the kube source's encoding). */
  contentType?: string;
  verbosity?: number;
  oomScoreAdj: number;
  conntrack: ConntrackSettings;
  /** Fields set in the file that kpng does not honour, by path (with the reason when useful). */
  ignored: string[];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Zero, empty or null all the way down: what kubeadm writes for "unset". */
export function isUnset(v: unknown): boolean {
  if (v === null || v === undefined || v === '' || v === 0 || v === false || v === '0s' || v === '0') return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isObj(v)) return Object.values(v).every(isUnset);
  return false;
}

/** Typed access to one object of the document, with paths for error messages. */
class Fields {
  constructor(private readonly o: Obj, private readonly at: string) {}
  path(k: string): string { return this.at ? `${this.at}.${k}` : k; }
  has(k: string): boolean { return !isUnset(this.o[k]); }
  raw(k: string): unknown { return this.o[k]; }
  keys(): string[] { return Object.keys(this.o); }
  sub(k: string): Fields {
    const v = this.o[k];
    if (v === undefined || v === null) return new Fields({}, this.path(k));
    if (!isObj(v)) throw new ConfigError(`${this.path(k)}: expected an object`);
    return new Fields(v, this.path(k));
  }
  str(k: string): string | undefined {
    const v = this.o[k];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new ConfigError(`${this.path(k)}: expected a string, got ${JSON.stringify(v)}`);
    return v;
  }
  bool(k: string): boolean | undefined {
    const v = this.o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'boolean') throw new ConfigError(`${this.path(k)}: expected true or false, got ${JSON.stringify(v)}`);
    return v;
  }
  int(k: string, min: number, max: number): number | undefined {
    const v = this.o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new ConfigError(`${this.path(k)}: expected a whole number in [${min}, ${max}], got ${JSON.stringify(v)}`);
    return v;
  }
  /** A positive duration in ms; undefined for unset or zero (kube-proxy's "use the default"). */
  duration(k: string): number | undefined {
    const v = this.o[k];
    if (v === undefined || v === null || v === '') return undefined;
    const ms = typeof v === 'string' ? parseGoDuration(v) : null;
    if (ms === null) throw new ConfigError(`${this.path(k)}: ${JSON.stringify(v)} is not a duration (e.g. 30s, 1m, 2h22m)`);
    return ms > 0 ? ms : undefined;
  }
  strList(k: string): string[] | undefined {
    const v = this.o[k];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new ConfigError(`${this.path(k)}: expected a list of strings`);
    return v as string[];
  }
}

const TOP_LEVEL = new Set(['apiVersion', 'kind', 'featureGates', 'clientConnection', 'logging', 'hostnameOverride', 'bindAddress', 'healthzBindAddress',
  'metricsBindAddress', 'bindAddressHardFail', 'enableProfiling', 'showHiddenMetricsForVersion', 'mode', 'iptables', 'ipvs', 'nftables', 'winkernel',
  'detectLocalMode', 'detectLocal', 'clusterCIDR', 'nodePortAddresses', 'oomScoreAdj', 'conntrack', 'configSyncPeriod', 'portRange', 'windowsRunAsService']);

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

export function parseKubeProxyConfiguration(text: string, source = 'config'): KubeProxySettings {
  const doc = configDocument(text, source);
  if (doc.apiVersion !== API_VERSION) throw new ConfigError(`${source}: apiVersion ${JSON.stringify(doc.apiVersion)} is not supported (expected ${API_VERSION})`);
  const f = new Fields(doc, '');
  const ignored: string[] = [];
  const ignore = (path: string, why = '') => ignored.push(why ? `${path} (${why})` : path);
  const ignoreIfSet = (fs: Fields, keys: string[], why = '') => { for (const k of keys) if (fs.has(k)) ignore(fs.path(k), why); };

  for (const k of f.keys()) if (!TOP_LEVEL.has(k)) ignore(k, 'unknown field');

  const mode = f.str('mode') ?? '';
  // kube-proxy reads the section of its mode; its default mode on Linux is iptables.
  const sectionName = mode === 'ipvs' ? 'ipvs' : mode === 'nftables' || (mode !== '' && mode !== 'iptables') ? 'nftables' : 'iptables';
  const section = f.sub(sectionName);

  const gates = f.raw('featureGates');
  if (isObj(gates)) for (const g of Object.keys(gates)) ignore(`featureGates.${g}`);

  const client = f.sub('clientConnection');
  ignoreIfSet(client, ['acceptContentTypes', 'qps', 'burst']);
  const contentType = client.str('contentType');
  // kube-proxy's client speaks these two; anything else is a mistake worth stopping on.
  if (contentType && !contentTypeOf(contentType)) {
    throw new ConfigError(`${client.path('contentType')}: ${JSON.stringify(contentType)} is not ${PROTOBUF} or application/json`);
  }

  const logging = f.sub('logging');
  const verbosity = logging.int('verbosity', 0, 1000);
  if (logging.has('format') && logging.str('format') !== 'text') ignore(logging.path('format'), 'kpng logs text');
  ignoreIfSet(logging, logging.keys().filter((k) => !['verbosity', 'format', 'flushFrequency', 'options'].includes(k)));

  const bindAddress = f.str('bindAddress');
  if (bindAddress && bindAddress !== '0.0.0.0' && bindAddress !== '::') ignore('bindAddress', 'kpng takes the node\'s addresses from its Node object');
  ignoreIfSet(f, ['enableProfiling', 'showHiddenMetricsForVersion', 'configSyncPeriod', 'portRange', 'windowsRunAsService']);
  if (f.has('winkernel')) ignore('winkernel', 'Windows only');

  const detect = f.str('detectLocalMode') ?? '';
  if (detect !== '' && detect !== 'ClusterCIDR') ignore('detectLocalMode', `${detect}: kpng tells pods by clusterCIDR`);
  if (f.has('detectLocal')) ignore('detectLocal');

  ignoreIfSet(section, ['masqueradeBit'], 'kpng uses its own mark');
  if (sectionName === 'iptables' && section.bool('localhostNodePorts') === true) ignore(section.path('localhostNodePorts'), 'node ports never answer on localhost in kpng');
  if (sectionName === 'iptables') ignoreIfSet(section, ['snatNodeInternalIP']);
  if (sectionName === 'ipvs') ignoreIfSet(section, ['scheduler', 'excludeCIDRs', 'strictARP', 'tcpTimeout', 'tcpFinTimeout', 'udpTimeout']);

  let nodePortAddresses: string[] | undefined;
  const npa = f.strList('nodePortAddresses');
  if (npa && npa.length) {
    nodePortAddresses = [];
    for (const a of npa) {
      if (a === 'all') nodePortAddresses.push('0.0.0.0/0', '::/0');
      else if (a === 'localhost') ignore('nodePortAddresses: localhost', 'node ports never answer on localhost in kpng');
      else nodePortAddresses.push(a);
    }
    if (nodePortAddresses.length === 0) nodePortAddresses = undefined;
  }

  const ct = f.sub('conntrack');
  const seconds = (k: string) => { const ms = ct.duration(k); return ms === undefined ? undefined : Math.floor(ms / 1000); };
  const conntrack: ConntrackSettings = {
    maxPerCore: ct.int('maxPerCore', 0, 2 ** 31 - 1) ?? KUBE_PROXY_CONNTRACK_DEFAULTS.maxPerCore,
    min: ct.int('min', 0, 2 ** 31 - 1) ?? KUBE_PROXY_CONNTRACK_DEFAULTS.min,
    tcpEstablishedTimeout: ct.raw('tcpEstablishedTimeout') === null || ct.raw('tcpEstablishedTimeout') === undefined ? KUBE_PROXY_CONNTRACK_DEFAULTS.tcpEstablishedTimeout : seconds('tcpEstablishedTimeout'),
    tcpCloseWaitTimeout: ct.raw('tcpCloseWaitTimeout') === null || ct.raw('tcpCloseWaitTimeout') === undefined ? KUBE_PROXY_CONNTRACK_DEFAULTS.tcpCloseWaitTimeout : seconds('tcpCloseWaitTimeout'),
    tcpBeLiberal: ct.bool('tcpBeLiberal') ?? false,
    udpTimeout: seconds('udpTimeout'),
    udpStreamTimeout: seconds('udpStreamTimeout'),
  };

  const cidr = f.str('clusterCIDR');
  const host = f.str('hostnameOverride')?.trim().toLowerCase();
  return {
    hostnameOverride: host || undefined,
    clusterCIDRs: cidr ? cidr.split(',').map((c) => c.trim()).filter(Boolean) : undefined,
    nodePortAddresses,
    masqueradeAll: section.bool('masqueradeAll') || undefined,
    syncPeriodMs: section.duration('syncPeriod'),
    // Zero means "default" in the file (kube-proxy's defaulting turns it into 1s).
    minSyncPeriodMs: section.duration('minSyncPeriod'),
    metricsBindAddress: f.str('metricsBindAddress'),
    healthzBindAddress: f.str('healthzBindAddress'),
    bindAddressHardFail: f.bool('bindAddressHardFail') || undefined,
    mode,
    kubeconfig: client.str('kubeconfig'),
    contentType: contentType || undefined,
    verbosity,
    oomScoreAdj: f.int('oomScoreAdj', -1000, 1000) ?? -999,
    conntrack,
    ignored,
  };
}

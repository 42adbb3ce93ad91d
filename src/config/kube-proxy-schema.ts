// The shape of kube-proxy's configuration file (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1,
// as Kubernetes v1.37 defines it) and upstream's defaults. The file is read against this shape: a
// field of the wrong type is an error naming its path, an unknown field at any depth is named by its
// path (kube-proxy falls back to lenient decoding for those and goes on; so does kpng).
import { parseGoDuration } from '../util/duration';

export const API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const KIND = 'KubeProxyConfiguration';

export type Leaf = 'string' | 'bool' | 'int' | 'float' | 'duration' | 'strings' | 'mapBool' | 'quantity' | 'flushFrequency' | 'vmodule';
export interface Shape { readonly [field: string]: Leaf | Shape }

const LOGGING_STREAM: Shape = { splitStream: 'bool', infoBufferSize: 'quantity' };

export const KUBE_PROXY_CONFIGURATION: Shape = {
  apiVersion: 'string',
  kind: 'string',
  featureGates: 'mapBool',
  clientConnection: { kubeconfig: 'string', acceptContentTypes: 'string', contentType: 'string', qps: 'float', burst: 'int' },
  logging: { format: 'string', flushFrequency: 'flushFrequency', verbosity: 'int', vmodule: 'vmodule', options: { text: LOGGING_STREAM, json: LOGGING_STREAM } },
  hostnameOverride: 'string',
  bindAddress: 'string',
  healthzBindAddress: 'string',
  metricsBindAddress: 'string',
  bindAddressHardFail: 'bool',
  enableProfiling: 'bool',
  showHiddenMetricsForVersion: 'string',
  mode: 'string',
  iptables: { masqueradeBit: 'int', masqueradeAll: 'bool', localhostNodePorts: 'bool', syncPeriod: 'duration', minSyncPeriod: 'duration' },
  ipvs: {
    syncPeriod: 'duration', minSyncPeriod: 'duration', scheduler: 'string', excludeCIDRs: 'strings', strictARP: 'bool',
    tcpTimeout: 'duration', tcpFinTimeout: 'duration', udpTimeout: 'duration',
  },
  // flowtable: kpng's fast path (--nft-flowtable), not in upstream's format (KEP-4963 proposes a field alike).
  nftables: { masqueradeBit: 'int', masqueradeAll: 'bool', syncPeriod: 'duration', minSyncPeriod: 'duration', flowtable: { interfaces: 'strings', packetThreshold: 'int' } },
  winkernel: { networkName: 'string', sourceVip: 'string', enableDSR: 'bool', rootHnsEndpointName: 'string', forwardHealthCheckVip: 'bool' },
  detectLocalMode: 'string',
  detectLocal: { bridgeInterface: 'string', interfaceNamePrefix: 'string' },
  clusterCIDR: 'string',
  nodePortAddresses: 'strings',
  oomScoreAdj: 'int',
  conntrack: {
    maxPerCore: 'int', min: 'int', tcpEstablishedTimeout: 'duration', tcpCloseWaitTimeout: 'duration', tcpBeLiberal: 'bool',
    udpTimeout: 'duration', udpStreamTimeout: 'duration',
  },
  configSyncPeriod: 'duration',
  portRange: 'string',
  windowsRunAsService: 'bool',
};

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export class ConfigError extends Error {}

/** Checks one leaf's value; returns a message (without the path) when it is wrong. null is "unset". */
function leafError(leaf: Leaf, v: unknown): string | undefined {
  if (v === null || v === undefined) return undefined;
  const want = (what: string) => `expected ${what}, got ${JSON.stringify(v)}`;
  switch (leaf) {
    case 'string': return typeof v === 'string' ? undefined : want('a string');
    case 'bool': return typeof v === 'boolean' ? undefined : want('true or false');
    case 'int': return typeof v === 'number' && Number.isInteger(v) && Math.abs(v) < 2 ** 31 ? undefined : want('a whole number');
    case 'float': return typeof v === 'number' ? undefined : want('a number');
    case 'duration': return typeof v === 'string' && parseGoDuration(v) !== null ? undefined : `${JSON.stringify(v)} is not a duration (e.g. 30s, 1m, 2h22m)`;
    // A Go duration string, or a number of nanoseconds (component-base's TimeOrMetaDuration).
    case 'flushFrequency': return typeof v === 'number' || (typeof v === 'string' && parseGoDuration(v) !== null) ? undefined : `${JSON.stringify(v)} is not a duration`;
    case 'strings': return Array.isArray(v) && v.every((x) => typeof x === 'string') ? undefined : want('a list of strings');
    case 'mapBool': return isObj(v) && Object.values(v).every((x) => typeof x === 'boolean') ? undefined : want('a map of names to true or false');
    case 'quantity': return typeof v === 'string' || typeof v === 'number' ? undefined : want('a quantity');
    case 'vmodule': return Array.isArray(v) && v.every((x) => isObj(x) && typeof x.filePattern === 'string' && Number.isInteger(x.verbosity)) ? undefined : want('a list of {filePattern, verbosity}');
  }
}

/** Type-checks `doc` against `shape`; returns the paths of fields the shape does not have. */
export function checkShape(doc: Obj, shape: Shape = KUBE_PROXY_CONFIGURATION, at = ''): string[] {
  const unknown: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    const path = at ? `${at}.${k}` : k;
    const s = shape[k];
    if (s === undefined) { unknown.push(path); continue; }
    if (typeof s === 'string') {
      const err = leafError(s, v);
      if (err) throw new ConfigError(`${path}: ${err}`);
    } else if (v !== null && v !== undefined) {
      if (!isObj(v)) throw new ConfigError(`${path}: expected an object, got ${JSON.stringify(v)}`);
      unknown.push(...checkShape(v, s, path));
    }
  }
  return unknown;
}

/** What `kube-proxy --write-config-to` writes on Linux: upstream's defaults, every field present. */
export function defaultConfiguration(): Obj {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    bindAddress: '0.0.0.0',
    bindAddressHardFail: false,
    clientConnection: { acceptContentTypes: '', burst: 10, contentType: 'application/vnd.kubernetes.protobuf', kubeconfig: '', qps: 5 },
    clusterCIDR: '',
    configSyncPeriod: '15m0s',
    conntrack: { maxPerCore: 32768, min: 131072, tcpBeLiberal: false, tcpCloseWaitTimeout: '1h0m0s', tcpEstablishedTimeout: '24h0m0s', udpStreamTimeout: '0s', udpTimeout: '0s' },
    detectLocal: { bridgeInterface: '', interfaceNamePrefix: '' },
    detectLocalMode: 'ClusterCIDR',
    enableProfiling: false,
    healthzBindAddress: '0.0.0.0:10256',
    hostnameOverride: '',
    iptables: { localhostNodePorts: true, masqueradeAll: false, masqueradeBit: 14, minSyncPeriod: '1s', syncPeriod: '30s' },
    ipvs: { excludeCIDRs: null, minSyncPeriod: '0s', scheduler: '', strictARP: false, syncPeriod: '30s', tcpFinTimeout: '0s', tcpTimeout: '0s', udpTimeout: '0s' },
    logging: { flushFrequency: '5s', format: 'text', options: { json: { infoBufferSize: '0' }, text: { infoBufferSize: '0' } }, verbosity: 0 },
    metricsBindAddress: '127.0.0.1:10249',
    mode: 'iptables',
    nftables: { masqueradeAll: false, masqueradeBit: 14, minSyncPeriod: '1s', syncPeriod: '30s' },
    nodePortAddresses: null,
    oomScoreAdj: -999,
    portRange: '',
    showHiddenMetricsForVersion: '',
    winkernel: { enableDSR: false, forwardHealthCheckVip: false, networkName: '', rootHnsEndpointName: '', sourceVip: '' },
  };
}

/** Zero, empty or null: what kubeadm writes for "use the default". */
export function isZero(v: unknown): boolean {
  if (v === null || v === undefined || v === '' || v === 0 || v === false) return true;
  if (typeof v === 'string' && parseGoDuration(v) === 0) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isObj(v)) return Object.values(v).every(isZero);
  return false;
}

// Fields whose zero value is meaningful (pointers in the Go type: unset is null, 0 is "leave as-is").
const ZERO_KEPT = new Set(['conntrack.maxPerCore', 'conntrack.min', 'conntrack.tcpEstablishedTimeout', 'conntrack.tcpCloseWaitTimeout', 'oomScoreAdj',
  'iptables.masqueradeBit', 'nftables.masqueradeBit', 'iptables.localhostNodePorts']);
// Fields upstream's defaulting leaves as they are, zero included.
const NOT_DEFAULTED = new Set(['ipvs.minSyncPeriod', 'ipvs.tcpTimeout', 'ipvs.tcpFinTimeout', 'ipvs.udpTimeout', 'conntrack.udpTimeout', 'conntrack.udpStreamTimeout',
  'detectLocalMode', 'nodePortAddresses', 'ipvs.excludeCIDRs']);

/**
 * Upstream's defaulting (SetDefaults_KubeProxyConfiguration): every unset field takes its default, and
 * so do zero values of the fields that are not pointers in the Go type. Returns a new object.
 */
export function withDefaults(user: Obj): Obj {
  const merge = (d: unknown, u: unknown, path: string): unknown => {
    if (isObj(d) && !path.endsWith('featureGates')) {
      const out: Obj = {};
      const uo = isObj(u) ? u : {};
      for (const k of new Set([...Object.keys(d), ...Object.keys(uo)])) out[k] = merge(d[k], uo[k], path ? `${path}.${k}` : k);
      return out;
    }
    if (u === undefined || u === null) return d;
    if (ZERO_KEPT.has(path) || NOT_DEFAULTED.has(path)) return u;
    return isZero(u) && d !== undefined ? d : u;
  };
  const out = merge(defaultConfiguration(), user, '') as Obj;
  out.featureGates = isObj(user.featureGates) ? { ...user.featureGates } : {};
  // The default servers listen on IPv6 addresses when the node's address is IPv6.
  const v6 = typeof out.bindAddress === 'string' && out.bindAddress.includes(':');
  if (v6 && isZero(user.healthzBindAddress)) out.healthzBindAddress = '[::]:10256';
  if (v6 && isZero(user.metricsBindAddress)) out.metricsBindAddress = '[::1]:10249';
  if (out.mode === '') out.mode = 'iptables';
  if (out.detectLocalMode === '' || out.detectLocalMode === null) out.detectLocalMode = 'ClusterCIDR';
  return out;
}

/** Reads the value at a dotted path. */
export function at(o: Obj, path: string): unknown {
  let cur: unknown = o;
  for (const k of path.split('.')) cur = isObj(cur) ? cur[k] : undefined;
  return cur;
}

/** Sets the value at a dotted path, creating objects on the way. */
export function setAt(o: Obj, path: string, v: unknown): void {
  const keys = path.split('.');
  let cur = o;
  for (const k of keys.slice(0, -1)) {
    if (!isObj(cur[k])) cur[k] = {};
    cur = cur[k] as Obj;
  }
  cur[keys[keys.length - 1]] = v;
}

/** The section upstream reads sync periods from, for a mode. */
export function modeSection(mode: string): 'ipvs' | 'nftables' | 'iptables' {
  if (mode === 'ipvs') return 'ipvs';
  // kpng's own backends (ebpf, ...) are nftables-based: they read the nftables section.
  return mode === '' || mode === 'iptables' ? 'iptables' : 'nftables';
}

/** The section upstream reads masqueradeAll (and the masquerade bit) from: nftables' or iptables'. */
export function masqueradeSection(mode: string): 'nftables' | 'iptables' {
  return modeSection(mode) === 'nftables' ? 'nftables' : 'iptables';
}

/**
 * The configuration as upstream writes it (--write-config-to, /configz): its internal form has one sync
 * period and one masqueradeAll, written back into the mode's section only; the other sections hold zeros.
 */
export function writtenForm(eff: Obj): Obj {
  const out = structuredClone(eff);
  const mode = typeof eff.mode === 'string' ? eff.mode : '';
  for (const sec of ['iptables', 'ipvs', 'nftables'] as const) {
    if (sec === modeSection(mode) || !isObj(out[sec])) continue;
    (out[sec] as Obj).syncPeriod = '0s';
    (out[sec] as Obj).minSyncPeriod = '0s';
  }
  for (const sec of ['iptables', 'nftables'] as const) if (sec !== masqueradeSection(mode) && isObj(out[sec])) (out[sec] as Obj).masqueradeAll = false;
  if (isObj(out.featureGates) && Object.keys(out.featureGates).length === 0) delete out.featureGates;
  return out;
}

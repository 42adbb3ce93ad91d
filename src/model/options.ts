// The node-wide settings the model needs (kube-proxy's --detect-local-mode with --cluster-cidr,
// --pod-bridge-interface and --pod-interface-name-prefix, --masquerade-all, --nodeport-addresses,
// --bind-address), validated once, with kube-proxy's defaults and validation rules
// (pkg/proxy/apis/config/validation).
import { canonicalCIDR, canonicalIP, cidrContains, ipFamily } from './ip';

/** How the "pod" client class is recognised (kube-proxy's --detect-local-mode). */
export type DetectLocalMode = 'ClusterCIDR' | 'NodeCIDR' | 'BridgeInterface' | 'InterfaceNamePrefix';
export const DETECT_LOCAL_MODES: readonly DetectLocalMode[] = ['ClusterCIDR', 'NodeCIDR', 'BridgeInterface', 'InterfaceNamePrefix'];

/** The keywords --nodeport-addresses takes besides CIDRs. */
export type NodePortKeyword = 'primary' | 'localhost' | 'all';
const NODE_PORT_KEYWORDS: readonly string[] = ['primary', 'localhost', 'all'] satisfies NodePortKeyword[];

export interface ModelOptions {
  detectLocalMode: DetectLocalMode;
  /**
   * ClusterCIDR mode: the pod network, canonical, at most one CIDR per family (sources inside are the
   * "pod" client class). Empty in the other modes (kube-proxy does not use --cluster-cidr there).
   */
  clusterCIDRs: string[];
  /** BridgeInterface mode: packets that arrive on this interface are pod traffic ('' otherwise). */
  podBridgeInterface: string;
  /** InterfaceNamePrefix mode: packets that arrive on an interface named so are pod traffic ('' otherwise). */
  podInterfaceNamePrefix: string;
  /** Masquerade every connection to a cluster IP. */
  masqueradeAll: boolean;
  /** Where node ports answer: keywords ('primary', 'localhost', 'all', each once) and canonical CIDRs, in the order given. */
  nodePortAddresses: string[];
  /** This node's primary address of its family, overriding the Node object's ('' = from the Node object). */
  bindAddress: string;
  /**
   * IPv4 node ports also answer on loopback addresses inside nodePortAddresses, as kube-proxy's
   * iptables mode does with localhostNodePorts (its default there); needs route_localnet on the node.
   */
  localhostNodePorts: boolean;
}

export const DEFAULT_MODEL_OPTIONS: ModelOptions = {
  detectLocalMode: 'ClusterCIDR', clusterCIDRs: [], podBridgeInterface: '', podInterfaceNamePrefix: '',
  masqueradeAll: false, nodePortAddresses: ['primary'], bindAddress: '', localhostNodePorts: false,
};

export class OptionError extends Error {}

/** What modelOptions() accepts: the flags as given (strings, lists of strings). */
export interface RawModelOptions {
  clusterCIDRs?: readonly string[];
  masqueradeAll?: boolean;
  nodePortAddresses?: readonly string[];
  /** '', 'ClusterCIDR', 'NodeCIDR', 'BridgeInterface' or 'InterfaceNamePrefix' ('' = ClusterCIDR). */
  detectLocalMode?: string;
  podBridgeInterface?: string;
  podInterfaceNamePrefix?: string;
  bindAddress?: string;
  localhostNodePorts?: boolean;
}

/** Linux interface names are at most 15 bytes (IFNAMSIZ - 1): a longer name or prefix matches nothing. */
const IFNAME_MAX = 15;

function cidrs(list: readonly string[], flag: string): string[] {
  return [...new Set(list.map((c) => {
    const v = canonicalCIDR(c.trim());
    if (!v) throw new OptionError(`${flag}: ${JSON.stringify(c)} is not a CIDR (e.g. 10.244.0.0/16 or fd00:10:244::/56)`);
    return v;
  }))];
}

/** --cluster-cidr as kube-proxy validates it: one CIDR, or a dual-stack pair (one per family). */
function clusterCIDRs(list: readonly string[]): string[] {
  const out = cidrs(list.map((c) => c.trim()).filter(Boolean), '--cluster-cidr');
  const v4 = out.filter((c) => ipFamily(c.split('/')[0]!) === 'IPv4');
  if (v4.length > 1 || out.length - v4.length > 1) {
    throw new OptionError(`--cluster-cidr ${JSON.stringify(out.join(','))}: expected one CIDR or a dual-stack pair (one IPv4, one IPv6)`);
  }
  return out;
}

function interfaceName(value: string | undefined, flag: string, mode: DetectLocalMode): string {
  const v = (value ?? '').trim();
  if (v === '') throw new OptionError(`${flag}: required with --detect-local-mode ${mode}`);
  if (v.length > IFNAME_MAX || /[\s/]/.test(v)) throw new OptionError(`${flag} ${JSON.stringify(v)}: not an interface name (at most ${IFNAME_MAX} characters, no spaces or '/')`);
  return v;
}

function nodePortAddresses(list: readonly string[]): string[] {
  const given = list.map((s) => s.trim()).filter(Boolean);
  if (given.length === 0) return ['primary']; // kube-proxy's default in nftables mode
  const out: string[] = [];
  for (const a of given) {
    if (NODE_PORT_KEYWORDS.includes(a)) {
      if (out.includes(a)) throw new OptionError(`--nodeport-addresses: ${JSON.stringify(a)} is given twice`);
      out.push(a);
      continue;
    }
    const c = canonicalCIDR(a);
    if (!c) throw new OptionError(`--nodeport-addresses: ${JSON.stringify(a)} is neither a CIDR nor one of the keywords primary, localhost, all`);
    if (!out.includes(c)) out.push(c);
  }
  return out;
}

function bindAddress(value: string | undefined): string {
  const v = (value ?? '').trim();
  if (v === '') return '';
  const ip = canonicalIP(v);
  if (!ip) throw new OptionError(`--bind-address ${JSON.stringify(v)}: not an IP address`);
  // 0.0.0.0 and :: (kube-proxy's default) leave the primary address to the Node object.
  return ip === '0.0.0.0' || ip === '::' ? '' : ip;
}

/** Validates and canonicalizes; throws OptionError naming the flag and the bad value. */
export function modelOptions(raw: RawModelOptions): ModelOptions {
  const given = (raw.detectLocalMode ?? '').trim();
  const mode = (given === '' ? 'ClusterCIDR' : given) as DetectLocalMode;
  if (!DETECT_LOCAL_MODES.includes(mode)) {
    throw new OptionError(`--detect-local-mode ${JSON.stringify(given)}: expected ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix`);
  }
  return {
    detectLocalMode: mode,
    clusterCIDRs: mode === 'ClusterCIDR' ? clusterCIDRs(raw.clusterCIDRs ?? []) : [],
    podBridgeInterface: mode === 'BridgeInterface' ? interfaceName(raw.podBridgeInterface, '--pod-bridge-interface', mode) : '',
    podInterfaceNamePrefix: mode === 'InterfaceNamePrefix' ? interfaceName(raw.podInterfaceNamePrefix, '--pod-interface-name-prefix', mode) : '',
    masqueradeAll: !!raw.masqueradeAll,
    nodePortAddresses: nodePortAddresses(raw.nodePortAddresses ?? []),
    bindAddress: bindAddress(raw.bindAddress),
    localhostNodePorts: !!raw.localhostNodePorts,
  };
}

export interface ModelNote { level: 'debug' | 'info'; text: string }

/**
 * What an operator should know about these settings where kpng, like kube-proxy's nftables mode,
 * does less than the flags might suggest (logged once when the model starts). No local detection is
 * kpng's long-standing default (and what `kpng file` runs with on a laptop): said at debug level only.
 */
export function modelNotes(o: ModelOptions): ModelNote[] {
  const notes: ModelNote[] = [];
  if (o.detectLocalMode === 'ClusterCIDR' && o.clusterCIDRs.length === 0) {
    notes.push({ level: 'debug', text: '--detect-local-mode ClusterCIDR without --cluster-cidr: pods cannot be told apart from other clients (no local traffic detection)' });
  }
  if (servesLocalhostNodePorts(o)) {
    notes.push({
      level: 'info',
      text: 'node ports also answer on 127.0.0.1 (localhost node ports, as kube-proxy\'s iptables mode): route_localnet=1 is set on the node, '
        + 'connections from 127.0.0.0/8 are masqueraded and other packets to 127.0.0.0/8 not already tracked are dropped; '
        + 'to turn this off, set --iptables-localhost-nodeports=false or leave loopback out of --nodeport-addresses',
    });
  } else if (o.nodePortAddresses.includes('localhost') || o.nodePortAddresses.some(isLoopbackCIDR)) {
    notes.push({
      level: 'info',
      text: '--nodeport-addresses: node ports are not served on loopback addresses (as kube-proxy\'s nftables mode without the KubeProxyNFTablesLocalhostNodePorts feature gate: '
        + 'a connection DNATed from 127.0.0.1 to a pod would need route_localnet)',
    });
  }
  return notes;
}

/**
 * Whether --nodeport-addresses (canonical) takes IPv4 loopback addresses in: all, localhost, a CIDR
 * holding 127.0.0.1, or nothing of IPv4 at all (the family then answers on every local address).
 */
export function servesIPv4Loopback(list: readonly string[]): boolean {
  const v4 = list.filter((a) => !a.includes(':'));
  return v4.length === 0 || v4.some((a) => a === 'all' || a === 'localhost' || (a.includes('/') && cidrContains(a, '127.0.0.1')));
}

/** Whether these settings serve IPv4 node ports on 127.0.0.1 (the node then needs route_localnet). */
export function servesLocalhostNodePorts(o: Pick<ModelOptions, 'localhostNodePorts' | 'nodePortAddresses'>): boolean {
  return o.localhostNodePorts && servesIPv4Loopback(o.nodePortAddresses);
}

/** A CIDR that holds loopback addresses only (127.0.0.0/8 or inside it, ::1/128). */
export function isLoopbackCIDR(cidr: string): boolean {
  const [addr, len] = cidr.split('/');
  if (addr === '::1') return len === '128';
  return ipFamily(addr!) === 'IPv4' && addr!.startsWith('127.') && Number(len) >= 8;
}

// Computes one service's ENLS item for one node from the trimmed objects.
import { cidrContains, hostPort, ipFamily } from './ip';
import { clusterIpRoutes, externalRoutes, type ClassOptions, type RouteInputs } from './client-routes';
import { EndpointList, IPFamily, NODE_KEY, serviceKey, type IPSet, type Item, type ServicePort } from './enls';
import type { Family, NodeSpec, ServiceSpec, SliceSpec } from './objects';
import type { Protocol } from './enls';
import { orEmpty } from '../util/intern';
import { sortedIndexOf } from '../util/sorted';
import { DEFAULT_MODEL_OPTIONS, servesLocalhostNodePorts, type ModelOptions } from './options';
import { categorize, type NodeView, type PortEndpoint } from './topology';

/** The node as the model sees it: name, zone and primary addresses (from its Node object, if any). */
export interface ModelNode extends NodeView {
  primary: string[];
}

/** Reachable from outside at all (upstream's ExternallyAccessible): what makes externalTrafficPolicy apply. */
export function isExternallyAccessible(svc: ServiceSpec): boolean {
  return svc.type === 'NodePort' || svc.type === 'LoadBalancer' || svc.externalIPs.length > 0;
}

/** The IPSet of no address, shared (frozen) by every item without one: most services have three. */
const NO_IPS: IPSet = Object.freeze({ v4: orEmpty<string>([]), v6: orEmpty<string>([]) });

/** An address or CIDR of IPv4. */
const isV4 = (ipOrCidr: string): boolean => ipFamily(ipOrCidr.split('/')[0]!) === 'IPv4';

function splitFamilies(ips: readonly string[]): IPSet {
  if (ips.length === 0) return NO_IPS;
  // One address (most services): the parsed list itself, shared (neither side is ever written to).
  if (ips.length === 1) return isV4(ips[0]!) ? { v4: ips as string[], v6: orEmpty([]) } : { v4: orEmpty([]), v6: ips as string[] };
  const v4: string[] = [], v6: string[] = [];
  for (const ip of ips) (isV4(ip) ? v4 : v6).push(ip);
  return { v4: orEmpty([...new Set(v4)].sort()), v6: orEmpty([...new Set(v6)].sort()) };
}

const FAMILIES: Array<[Family, IPFamily, keyof IPSet]> = [['IPv4', IPFamily.IPV4, 'v4'], ['IPv6', IPFamily.IPV6, 'v6']];

/**
 * The endpoints of one service port across the service's slices of one family: the slice port that
 * matches by name and protocol gives the target port (per slice); in the order of their "addr:port"
 * text (hostPort), de-duplicated by address and port (slices in name order, first wins).
 */
export function portEndpoints(portName: string, protocol: Protocol, slices: readonly SliceSpec[], family: Family): PortEndpoint[] {
  const found: PortEndpoint[] = [];
  for (const slice of slices) {
    if (slice.family !== family) continue;
    const sp = slice.ports.find((p) => p.name === portName && p.protocol === protocol);
    if (!sp) continue;
    const eps = slice.endpoints;
    for (let i = 0; i < eps.length; i++) found.push(eps.withPort(i, sp.port));
  }
  if (found.length < 2) return found;
  // A stable sort keeps equal endpoints in slice order, so the first of each run is the one kept.
  // With one target port (the usual case) the "addr:port" texts compare as the addresses followed by
  // the separator, without building them (the keys and a Map of them were most of a 50k compute).
  const port = found[0]!.port;
  if (found.every((ep) => ep.port === port)) {
    const sep = family === 'IPv6' ? 0x5d /* ] */ : 0x3a; /* : */
    found.sort((a, b) => compareThenSep(a.ip, b.ip, sep));
  } else {
    const keys = new Map(found.map((ep) => [ep, hostPort(ep.ip, ep.port)]));
    found.sort((a, b) => { const x = keys.get(a)!, y = keys.get(b)!; return x < y ? -1 : x > y ? 1 : 0; });
  }
  return found.filter((ep, i) => i === 0 || ep.ip !== found[i - 1]!.ip || ep.port !== found[i - 1]!.port);
}

/** How `a + sep` compares with `b + sep` (sep a char code), by UTF-16 code units as `<` does. */
function compareThenSep(a: string, b: string, sep: number): number {
  const n = Math.min(a.length, b.length);
  for (let k = 0; k < n; k++) {
    const d = a.charCodeAt(k) - b.charCodeAt(k);
    if (d !== 0) return d;
  }
  if (a.length === b.length) return 0;
  return a.length < b.length ? sep - b.charCodeAt(n) : a.charCodeAt(n) - sep;
}

function toEndpoints(eps: readonly PortEndpoint[], node: NodeView, terminating: boolean): EndpointList {
  if (eps.length === 0) return EndpointList.EMPTY;
  return EndpointList.build(eps.map((ep) => ep.ip), eps.map((ep) => ep.port), eps.map((ep) => ep.nodeName === node.name), terminating);
}

const hostCidr = (ip: string): string => `${ip}/${ip.includes(':') ? 128 : 32}`;

/**
 * loadBalancerSourceRanges of each family; when one contains the node's primary address, the LB IPs
 * are allowed too (a VIP-like load balancer often makes the VIP a local address, so the node reaches
 * it with the VIP as source).
 */
function allowedSources(svc: ServiceSpec, lbIPs: IPSet, node: ModelNode): IPSet {
  if (svc.loadBalancerSourceRanges.length === 0) return NO_IPS;
  const ranges = splitFamilies(svc.loadBalancerSourceRanges);
  const fromNode = rangesHoldNode(ranges, node);
  const out: IPSet = { v4: [], v6: [] };
  for (const [, , k] of FAMILIES) {
    if (ranges[k].length === 0) continue;
    out[k] = [...new Set([...ranges[k], ...(fromNode[k] ? lbIPs[k].map(hostCidr) : [])])].sort();
  }
  return out;
}

/** Per family: some source range contains the node's primary address of that family. */
function rangesHoldNode(ranges: IPSet, node: ModelNode): { v4: boolean; v6: boolean } {
  const holds = (fam: Family, k: keyof IPSet): boolean => {
    const nodeIP = node.primary.find((ip) => ipFamily(ip) === fam);
    return nodeIP !== undefined && ranges[k].some((r) => cidrContains(r, nodeIP));
  };
  return { v4: holds('IPv4', 'v4'), v6: holds('IPv6', 'v6') };
}

/**
 * What of the node one service's item depends on. computeServiceItem reads the node only through
 * these: its name (endpoints' `local`, local endpoints, node hints), its zone (zone hints) and, with
 * source ranges, whether they contain its primary addresses. Nodes alike in all three get the same item.
 */
export interface NodeDependence {
  /**
   * Node names of the endpoints and of their node hints, sorted, each once: such a node gets an item
   * of its own. (A sorted list, not a Set: a Set per service costs several times the heap of a short list.)
   */
  names: readonly string[];
  /** Zones of the endpoints' zone hints, sorted, each once. */
  zones: readonly string[];
  /** loadBalancerSourceRanges split by family (empty: the node's addresses do not matter). */
  ranges: IPSet | null;
}

/** Whether sorted `list` holds `x` (binary search: a service can name a thousand nodes). */
export const sortedHas = (list: readonly string[], x: string): boolean => sortedIndexOf(list, x) >= 0;

const sortedList = (set: Set<string> | undefined): readonly string[] => (set ? orEmpty([...set].sort()) : orEmpty([]));

export function nodeDependence(svc: ServiceSpec, slices: readonly SliceSpec[]): NodeDependence {
  let names: Set<string> | undefined, zones: Set<string> | undefined;
  for (const s of slices) {
    const eps = s.endpoints;
    for (let i = 0; i < eps.length; i++) {
      const nodeName = eps.nodeName(i), nodeHints = eps.nodeHints(i), zoneHints = eps.zoneHints(i);
      if (nodeName !== null) (names ??= new Set()).add(nodeName);
      if (nodeHints) for (const n of nodeHints) (names ??= new Set()).add(n);
      if (zoneHints) for (const z of zoneHints) (zones ??= new Set()).add(z);
    }
  }
  return { names: sortedList(names), zones: sortedList(zones), ranges: svc.loadBalancerSourceRanges.length ? splitFamilies(svc.loadBalancerSourceRanges) : null };
}

/**
 * The class of nodes `node` falls in for a service: every node of a class gets the same item, so it
 * can be computed once and shared. null when the node is named by the service (it gets its own).
 */
export function nodeClass(dep: NodeDependence, node: ModelNode): string | null {
  if (sortedHas(dep.names, node.name)) return null;
  const zone = node.zone !== '' && sortedHas(dep.zones, node.zone) ? node.zone : '';
  if (!dep.ranges) return zone;
  const held = rangesHoldNode(dep.ranges, node);
  return `${zone}\u0000${held.v4 ? 1 : 0}${held.v6 ? 1 : 0}`;
}

export function computeServiceItem(svc: ServiceSpec, slices: readonly SliceSpec[], node: ModelNode, opts: ModelOptions = DEFAULT_MODEL_OPTIONS): Item {
  const sortedSlices = [...slices].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const clusterIps = splitFamilies(svc.clusterIPs);
  const externalIps = splitFamilies(svc.externalIPs);
  const loadBalancerIps = splitFamilies(svc.loadBalancerIPs);
  const allowed = allowedSources(svc, loadBalancerIps, node);
  const svcExternal = isExternallyAccessible(svc);

  const ports: ServicePort[] = [];
  for (const [fam, family, k] of FAMILIES) {
    if (clusterIps[k].length === 0) continue; // not a service of this family
    const classes: ClassOptions = { masqueradeAll: opts.masqueradeAll, podClass: detectsPods(opts, fam) };
    for (const p of svc.ports) {
      const eps = portEndpoints(p.name, p.protocol, sortedSlices, fam);
      const hasExt = externalIps[k].length > 0, hasLB = loadBalancerIps[k].length > 0;
      const policy = {
        internalLocal: svc.internalTrafficPolicy === 'Local',
        externalLocal: svcExternal && svc.externalTrafficPolicy === 'Local',
        externallyAccessible: p.nodePort !== 0 || hasExt || hasLB,
      };
      const c = categorize(eps, policy, node);
      const inputs: RouteInputs = { ...policy, hasEndpoints: c.hasAny, hasLocalEndpoints: c.local.length > 0 };
      ports.push({
        port: p, // the parsed port (frozen, shared by every service with the same ports)
        family,
        clusterEndpoints: toEndpoints(c.cluster, node, c.clusterFallback),
        localEndpoints: toEndpoints(c.local, node, c.localFallback),
        clusterIp: clusterIpRoutes(inputs, classes),
        externalIp: hasExt ? externalRoutes(inputs, classes) : null,
        loadBalancerIp: hasLB ? externalRoutes(inputs, classes) : null,
        nodePort: p.nodePort !== 0 ? externalRoutes(inputs, classes) : null,
        // Without endpoints every source is rejected anyway (upstream skips the firewall then).
        loadBalancerFirewall: hasLB && c.hasAny && allowed[k].length > 0,
      });
    }
  }
  const service = {
    namespace: svc.namespace,
    name: svc.name,
    type: svc.type,
    clusterIps,
    externalIps,
    loadBalancerIps,
    loadBalancerSourceRanges: orEmpty([...new Set(svc.loadBalancerSourceRanges)].sort()),
    sessionAffinity: svc.affinityTimeout === null ? null : { timeoutSeconds: svc.affinityTimeout },
    internalTrafficPolicy: svc.internalTrafficPolicy,
    externalTrafficPolicy: svcExternal ? svc.externalTrafficPolicy : 'Cluster',
    healthCheckNodePort: svc.healthCheckNodePort,
    ports,
    loadBalancerAllowedSources: allowed,
  };
  return { key: serviceKey(svc.namespace, svc.name), service };
}

/**
 * Whether pods can be told apart from other clients in a family (kube-proxy's local traffic detector
 * of that family is implemented). ClusterCIDR: a cluster CIDR of the family was given. The interface
 * modes: always. NodeCIDR: assumed, so that a service's item does not depend on each node's pod
 * CIDRs; the node item carries them, and until this node's Node has one of the family (kube-proxy
 * waits for them at start) its pods are matched by nothing and are "other" clients there.
 */
export function detectsPods(opts: ModelOptions, family: Family): boolean {
  if (opts.detectLocalMode !== 'ClusterCIDR') return true;
  return opts.clusterCIDRs.some((c) => ipFamily(c.split('/')[0]!) === family);
}

/**
 * The node's primary address per family (IPv4 first): the Node object's, except that --bind-address
 * takes the place of the one of its family (kube-proxy's detectNodeIPs). Used for 'primary' node-port
 * addresses and to tell whether source ranges contain the node.
 */
export function primaryAddresses(node: NodeSpec | undefined, opts: ModelOptions): string[] {
  const fromNode = node?.primary ?? [];
  if (!opts.bindAddress) return fromNode;
  const fam = ipFamily(opts.bindAddress);
  const out = [...fromNode.filter((ip) => ipFamily(ip) !== fam), opts.bindAddress];
  return out.sort((a, b) => (ipFamily(a) === 'IPv4' ? 0 : 1) - (ipFamily(b) === 'IPv4' ? 0 : 1));
}

const isLoopbackIP = (ip: string): boolean => ip === '::1' || ip.startsWith('127.');
const ZERO: Record<keyof IPSet, string> = { v4: '0.0.0.0/0', v6: '::/0' };

/**
 * Where node ports answer, per family, as kube-proxy expands --nodeport-addresses
 * (expandNodePortAddressKeywords, NewNodePortAddresses): 'primary' is the node's primary address of
 * each family (none for a family whose address is unknown or loopback), 'localhost' 127.0.0.0/8 and
 * ::1/128, 'all' 0.0.0.0/0 and ::/0. A family left without any CIDR accepts node ports on every local
 * address; a /0 among others makes the others moot. Loopback CIDRs stay in the list: backends never
 * serve node ports on loopback addresses, so a family with only those serves none (as upstream).
 */
export function nodePortAddresses(opts: ModelOptions, primary: readonly string[]): IPSet {
  const cidrs: string[] = [];
  for (const a of opts.nodePortAddresses) {
    if (a === 'primary') cidrs.push(...primary.filter((ip) => !isLoopbackIP(ip)).map(hostCidr));
    else if (a === 'localhost') cidrs.push('127.0.0.0/8', '::1/128');
    else if (a === 'all') cidrs.push(ZERO.v4, ZERO.v6);
    else cidrs.push(a);
  }
  const chosen = splitFamilies(cidrs);
  const family = (k: keyof IPSet): string[] => {
    const l = chosen[k];
    return l.length === 0 || l.includes(ZERO[k]) ? [ZERO[k]] : l;
  };
  return { v4: family('v4'), v6: family('v6') };
}

/** The node's pod network per family for NodeCIDR detection: the first podCIDR of each family, as upstream. */
function nodePodCIDRs(node: NodeSpec | undefined): string[] {
  const out: string[] = [];
  for (const fam of ['IPv4', 'IPv6'] as const) {
    const c = node?.podCIDRs.find((p) => ipFamily(p.split('/')[0]!) === fam);
    if (c) out.push(c);
  }
  return out;
}

export function computeNodeItem(name: string, node: NodeSpec | undefined, opts: ModelOptions = DEFAULT_MODEL_OPTIONS): Item {
  const mode = opts.detectLocalMode;
  const ports = nodePortAddresses(opts, primaryAddresses(node, opts));
  return {
    key: NODE_KEY,
    node: {
      name,
      zone: node?.zone ?? '',
      addresses: node?.addresses ?? [],
      podCidrs: splitFamilies(mode === 'ClusterCIDR' ? opts.clusterCIDRs : mode === 'NodeCIDR' ? nodePodCIDRs(node) : []),
      nodePortAddresses: ports,
      podBridgeInterface: opts.podBridgeInterface,
      podInterfaceNamePrefix: opts.podInterfaceNamePrefix,
      // Only where the settings alone say so too: route_localnet is set at start from them
      // (servesLocalhostNodePorts), before any Node is read ('primary' on a node without an IPv4 primary
      // expands to every address here, not there).
      ...(servesLocalhostNodePorts(opts) && ports.v4.some((c) => cidrContains(c, '127.0.0.1')) ? { localhostNodePorts: true } : {}),
    },
  };
}

// A node's world for packet tests: raw Kubernetes objects -> the real ClusterStore / NodeState (the
// model) -> the nft backend's full sync ops -> the fake tables -> a tracer.
import { fullSyncOps, TableModel } from '../../src/backend/nft/plan';
import type { IpFamily } from '../../src/backend/nft/types';
import { NODE_KEY, type NodeInfo, type Service } from '../../src/model/enls';
import { modelOptions } from '../../src/model/options';
import { cluster } from './k8s';
import { FakeNft } from '../../src/backend/nft/fake';
import { Tracer, type Packet, type TraceResult } from './nft-tracer';

type Obj = Record<string, unknown>;

export interface WorldOptions {
  node?: string;
  /** --cluster-cidr, --masquerade-all, --nodeport-addresses as the CLI takes them. */
  clusterCIDRs?: string[];
  masqueradeAll?: boolean;
  nodePortAddresses?: string[];
  /** --detect-local-mode, --pod-bridge-interface, --pod-interface-name-prefix, --bind-address as the CLI takes them. */
  detectLocalMode?: string;
  podBridgeInterface?: string;
  podInterfaceNamePrefix?: string;
  bindAddress?: string;
  /** --localhost-nodeports (kube-proxy's iptables mode). */
  localhostNodePorts?: boolean;
  /** Local addresses beyond the Node object's (e.g. an address kubelet does not report). */
  extraLocal?: string[];
}

/** The services and node item of one node's ENLS. */
export function enlsOf(state: { items(): Iterable<{ key: string; service?: Service | null; node?: NodeInfo | null }> }): { services: Array<[string, Service]>; node: NodeInfo | undefined } {
  const services: Array<[string, Service]> = [];
  let node: NodeInfo | undefined;
  for (const it of state.items()) {
    if (it.key === NODE_KEY && it.node) node = it.node;
    else if (it.service) services.push([it.key, it.service]);
  }
  return { services, node };
}

/** Full sync of both families into a new fake. */
export function renderFull(services: Array<[string, Service]>, node: NodeInfo | undefined, nft = new FakeNft()): FakeNft {
  const fams: IpFamily[] = ['ip', 'ip6'];
  nft.apply(fams.map((fam) => ({ fam, ops: fullSyncOps(new TableModel(fam), services, node) })));
  return nft;
}

export function nftWorld(objects: Obj[], o: WorldOptions = {}) {
  const model = modelOptions({
    clusterCIDRs: o.clusterCIDRs ?? [], masqueradeAll: o.masqueradeAll, nodePortAddresses: o.nodePortAddresses,
    detectLocalMode: o.detectLocalMode, podBridgeInterface: o.podBridgeInterface, podInterfaceNamePrefix: o.podInterfaceNamePrefix, bindAddress: o.bindAddress, localhostNodePorts: o.localhostNodePorts,
  });
  const c = cluster(o.node ?? 'n1', objects, { model });
  const { services, node } = enlsOf(c.state);
  const nft = renderFull(services, node);
  const tracer = new Tracer(nft, { localAddrs: [...(node?.addresses ?? []), ...(o.extraLocal ?? [])] });
  return {
    c, nft, tracer, services, node,
    trace: (p: Packet, choose?: string): TraceResult => tracer.trace(p, choose),
    /** verdict, endpoints and masquerade in one line, for compact expectations. */
    flow: (p: Packet): string => brief(tracer.trace(p)),
  };
}

/** "DNAT 10.180.0.1:80,10.180.2.1:80 masq" / "DROP" / "REJECT" / "ACCEPT". */
export function brief(r: TraceResult): string {
  if (r.verdict !== 'DNAT') return r.verdict;
  const m = r.masqueraded === true ? ' masq' : r.masqueraded === 'mixed' ? ' masq?' : '';
  return `DNAT ${r.endpoints.join(',')}${m}`;
}

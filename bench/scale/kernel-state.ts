// Correctness at scale, checked from outside kpng: what a node's KERNEL does with cluster-IP traffic,
// read from the kernel itself (nftables listings, pinned BPF maps) and never from a proxy's own state,
// to be compared with what the API says (expected.ts). Nothing here imports kpng's src/: a wrong
// constant there must not be repeated on this side.
//   kpng-nft      kpng's ip/ip6 tables (`kpng`, or place.nftTable)       kernel-nft.ts
//   upstream-nft  kube-proxy's nftables mode (ip/ip6 `kube-proxy`)       kernel-nft.ts
//   kpng-ebpf     the socket LB's pinned maps (kernel-ebpf.ts); the cluster IPs, and the service
//                 ports the maps do not hold (overflow: served by DNAT), from its nft part's tables
import { dumpSocketLb, type SocketLbEntry } from './kernel-ebpf';
import { clusterIpsOfTable, HOLE, listTable, type DestResult, type NftFamily } from './kernel-nft';
import { placeName, type KernelPlace } from './kernel-place';

export type { KernelPlace } from './kernel-place';
export { HOLE } from './kernel-nft';

export type Protocol = 'TCP' | 'UDP' | 'SCTP';
/**
 * Cluster-IP traffic as a node's kernel sends it: key `${ip}:${port}/${protocol}` (IPv6 in brackets:
 * `[fd00::1]:80/TCP`), value: the sorted endpoint list `${ip}:${port}` (IPv6 bracketed) a new connection
 * can be sent to. A service port with no endpoints (rejected/dropped) is present with []. Some new
 * connections finding no endpoint where others find one (a numgen value without an element, a slot
 * of the socket LB without a backend) adds the entry HOLE.
 */
export type ClusterIpTable = Map<string, string[]>;
export type ProxyKind = 'kpng-nft' | 'kpng-ebpf' | 'upstream-nft';

const bracket = (ip: string): string => (ip.includes(':') ? `[${ip}]` : ip);
/** The table key of a cluster IP's service port. */
export const tableKey = (ip: string, port: number, protocol: Protocol | string): string => `${bracket(ip)}:${port}/${protocol}`;

/** A walk's result as a table value. */
const endpointsOf = (r: DestResult): string[] => (r.hole ? [...r.endpoints, HOLE].sort() : r.endpoints);

/** The cluster IPs (set `cluster-ips`, both layouts) and the cluster-IP table of one proxy's ip and ip6 tables; throws when neither exists. */
async function readNft(place: KernelPlace, table: string): Promise<{ table: ClusterIpTable; clusterIps: Set<string> }> {
  const out: ClusterIpTable = new Map();
  const clusterIps = new Set<string>();
  let found = 0;
  for (const fam of ['ip', 'ip6'] as NftFamily[]) {
    const listing = await listTable(place, fam, table);
    if (!listing) continue;
    found++;
    const { addrs, dests } = clusterIpsOfTable(listing);
    for (const a of addrs) clusterIps.add(a);
    for (const { dest, result } of dests) out.set(tableKey(dest.daddr, dest.port, dest.proto.toUpperCase()), endpointsOf(result));
  }
  if (found === 0) throw new Error(`no table ip ${table} nor ip6 ${table} in ${placeName(place)}`);
  return { table: out, clusterIps };
}

/** A socket-LB entry as a table value: refused -> [], a slot without backend -> HOLE. */
function socketLbEndpoints(e: SocketLbEntry): string[] {
  if (e.refuse || e.count === 0) return [];
  const eps = [...new Set(e.backends)];
  if (e.missing.length) eps.push(HOLE);
  return eps.sort();
}

/**
 * The kpng eBPF backend as a process of the node (in the attach cgroup) sees it: each cluster-IP
 * service port from the socket LB's maps; one the maps do not hold (a service past
 * --ebpf-map-entries) passes connect() untouched and is DNATed by the nft part, so it comes from there.
 * The maps do not say which addresses are cluster IPs: the nft part's `cluster-ips` set does.
 * readClusterIps('kpng-nft', place) on the same node checks the nft part alone (pods with
 * --ebpf-host-netns-only, processes outside the cgroup, other hosts).
 */
async function readEbpf(place: KernelPlace): Promise<ClusterIpTable> {
  const nft = await readNft(place, place.nftTable ?? 'kpng');
  const out: ClusterIpTable = new Map();
  for (const e of await dumpSocketLb(place)) {
    if (!nft.clusterIps.has(e.addr)) continue; // an external or LB IP, or a node port on a node address
    out.set(tableKey(e.addr, e.port, String(e.proto)), socketLbEndpoints(e));
  }
  for (const [k, v] of nft.table) if (!out.has(k)) out.set(k, v);
  return out;
}

/** The cluster-IP table of one node's kernel (see ClusterIpTable), read in `place`. */
export async function readClusterIps(kind: ProxyKind, place: KernelPlace): Promise<ClusterIpTable> {
  switch (kind) {
    case 'kpng-nft': return (await readNft(place, place.nftTable ?? 'kpng')).table;
    case 'upstream-nft': return (await readNft(place, 'kube-proxy')).table;
    case 'kpng-ebpf': return readEbpf(place);
  }
}

/** Compares an expected table with the kernel's; returns human-readable mismatch lines (missing service, extra service, endpoints differ: expected X got Y). */
export function diffTables(expected: ClusterIpTable, actual: ClusterIpTable): string[] {
  const out: string[] = [];
  const show = (l: string[]) => (l.length ? l.join(', ') : 'none');
  for (const k of [...new Set([...expected.keys(), ...actual.keys()])].sort()) {
    const e = expected.get(k);
    const a = actual.get(k);
    if (a === undefined) out.push(`${k}: missing service (expected ${show(e!)})`);
    else if (e === undefined) out.push(`${k}: extra service (got ${show(a)})`);
    else {
      const es = [...e].sort();
      const as = [...a].sort();
      if (es.length !== as.length || es.some((x, i) => x !== as[i])) {
        const [eSet, aSet] = [new Set(es), new Set(as)];
        const missing = es.filter((x) => !aSet.has(x));
        const extra = as.filter((x) => !eSet.has(x));
        out.push(`${k}: endpoints differ: expected ${show(es)} got ${show(as)} (missing ${show(missing)}; extra ${show(extra)})`);
      }
    }
  }
  return out;
}

// What /proxyMode answers for a backend: kube-proxy's own mode names, which the tools reading it know
// (upstream's e2e suite, for one, compares it with "iptables").
//  - nft: nftables, the same dataplane as kube-proxy's nftables mode;
//  - ipvs: ipvs;
//  - ebpf: nftables. The socket-level load balancer takes pod and node connections at connect(), and
//    every other packet (node ports, external and load-balancer IPs from outside) goes through the
//    same nftables rules as the nft backend; kpng exports nftables mode's metrics for it too. No
//    upstream mode is closer, and an unknown word would only make tools fall back to guessing.
//  - anything else (a plugin's backend, routes, dump): its own name; kube-proxy has no word for it.
const MODES: Record<string, string> = { nft: 'nftables', ipvs: 'ipvs', ebpf: 'nftables' };

export function proxyModeOf(backend: string): string {
  return MODES[backend] ?? backend;
}

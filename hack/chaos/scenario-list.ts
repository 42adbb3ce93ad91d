// The scenarios `make chaos` knows, in the order issue 50 ranks them, and how SCENARIOS=... picks
// some. Pure (no cluster): test/chaos-scenarios.test.ts.

export type Backend = 'nft' | 'ebpf' | 'upstream';
export const BACKENDS: readonly Backend[] = ['nft', 'ebpf', 'upstream'];

export interface ScenarioInfo {
  name: string;
  title: string;
  /** Only with these proxies (default: all). */
  backends?: Backend[];
}

export const SCENARIOS: readonly ScenarioInfo[] = [
  { name: 'baseline', title: 'no fault: the endpoint churn and the probes alone' },
  { name: 'api-kill', title: 'the API server killed (SIGKILL) and started again' },
  { name: 'api-partition', title: "the API server unreachable for the proxy (its node's pods) while endpoints change" },
  { name: 'proxy-kill', title: "the proxy's pod on kc-node1 deleted (force, grace 0) every 30 s" },
  { name: 'tamper-flush', title: '`nft flush ruleset` on kc-node1' },
  { name: 'tamper-table', title: "`nft delete table` of the proxy's tables on kc-node1" },
  { name: 'etcd-compact', title: 'etcd compacted to its current revision and defragmented, then the API server restarted' },
  { name: 'kubelet-restart', title: "kc-node1's containerd and kubelet restarted (SIGTERM; started again a second later)" },
  { name: 'conntrack-full', title: "kc-node1's conntrack table full for 30 s (nf_conntrack_max lowered, a flood in the node)" },
  { name: 'bpf-map-full', title: 'the service map too small (--ebpf-map-entries 24) for 60 s of churn', backends: ['ebpf'] },
  { name: 'batch-rejected', title: "the proxy's nftables batches refused on kc-node1 for 20 s (its IPv4 table taken by another process's owned table)" },
];

/** The default: what the issue ranks first and a run of the three proxies fits in half an hour. */
export const DEFAULT_SCENARIOS = ['baseline', 'api-kill', 'api-partition', 'tamper-flush', 'tamper-table'];

/**
 * "a,b" or "all" (or empty: the default) to scenario names, in the order given, each once; those
 * that do not apply to the backend are left out. An unknown name is an error naming the known ones.
 */
export function parseScenarioList(spec: string | undefined, backend: Backend): ScenarioInfo[] {
  const s = (spec ?? '').trim();
  const names = s === '' ? DEFAULT_SCENARIOS : s === 'all' ? SCENARIOS.map((x) => x.name) : s.split(/[\s,]+/).filter(Boolean);
  const out: ScenarioInfo[] = [];
  for (const name of names) {
    const info = SCENARIOS.find((x) => x.name === name);
    if (!info) throw new Error(`unknown scenario "${name}" (known: ${SCENARIOS.map((x) => x.name).join(', ')}, or all)`);
    if (out.includes(info)) continue;
    if (info.backends && !info.backends.includes(backend)) continue;
    out.push(info);
  }
  return out;
}

export function parseBackend(s: string | undefined): Backend {
  const b = (s ?? 'nft') as Backend;
  if (!BACKENDS.includes(b)) throw new Error(`backend: "${s}" is not ${BACKENDS.join(', ')}`);
  return b;
}

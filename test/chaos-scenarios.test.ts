// hack/chaos/scenario-list.ts: SCENARIOS=... and BACKEND=... of `make chaos`; every listed scenario
// has an implementation (hack/chaos/scenarios/index.ts) under its own name.
import { BACKENDS, DEFAULT_SCENARIOS, parseBackend, parseScenarioList, SCENARIOS } from '../hack/chaos/scenario-list';
import { BY_NAME } from '../hack/chaos/scenarios';

describe('chaos scenario list', () => {
  test('empty means the default list, "all" every scenario in the order of the issue', () => {
    expect(parseScenarioList(undefined, 'nft').map((s) => s.name)).toEqual(DEFAULT_SCENARIOS);
    expect(parseScenarioList('  ', 'nft').map((s) => s.name)).toEqual(DEFAULT_SCENARIOS);
    expect(parseScenarioList('all', 'ebpf').map((s) => s.name)).toEqual(SCENARIOS.map((s) => s.name));
  });

  test('names in the order given, each once, commas or spaces', () => {
    expect(parseScenarioList('tamper-table,api-kill tamper-table', 'ebpf').map((s) => s.name)).toEqual(['tamper-table', 'api-kill']);
  });

  test('an unknown name is refused, naming the known ones', () => {
    expect(() => parseScenarioList('api-kill,bpf-ful', 'nft')).toThrow(/unknown scenario "bpf-ful" \(known: baseline, api-kill/);
  });

  test('a scenario for some backends only is left out for the others', () => {
    const only = { name: 'only-ebpf', title: 't', backends: ['ebpf' as const] };
    (SCENARIOS as unknown as object[]).push(only);
    try {
      expect(parseScenarioList('only-ebpf,baseline', 'nft').map((s) => s.name)).toEqual(['baseline']);
      expect(parseScenarioList('only-ebpf', 'ebpf').map((s) => s.name)).toEqual(['only-ebpf']);
    } finally {
      (SCENARIOS as unknown as object[]).pop();
    }
  });

  test('backends: nft by default, the three known, anything else refused', () => {
    expect(parseBackend(undefined)).toBe('nft');
    for (const b of BACKENDS) expect(parseBackend(b)).toBe(b);
    expect(() => parseBackend('ipvs')).toThrow(/not nft, ebpf, upstream/);
  });

  test("issue 50's scenarios are listed; bpf-map-full only with the eBPF backend", () => {
    for (const name of ['api-kill', 'api-partition', 'etcd-compact', 'proxy-kill', 'kubelet-restart', 'tamper-flush', 'tamper-table', 'conntrack-full', 'bpf-map-full', 'batch-rejected']) {
      expect(SCENARIOS.map((s) => s.name)).toContain(name);
    }
    expect(parseScenarioList('all', 'ebpf').map((s) => s.name)).toContain('bpf-map-full');
    for (const b of ['nft', 'upstream'] as const) {
      expect(parseScenarioList('all', b).map((s) => s.name)).not.toContain('bpf-map-full');
      expect(parseScenarioList('bpf-map-full,kubelet-restart', b).map((s) => s.name)).toEqual(['kubelet-restart']);
    }
  });

  test('every listed scenario is implemented under its name, and every default is listed', () => {
    for (const s of SCENARIOS) expect(BY_NAME[s.name]?.info).toBe(s);
    expect(Object.keys(BY_NAME).sort()).toEqual(SCENARIOS.map((s) => s.name).sort());
    for (const d of DEFAULT_SCENARIOS) expect(SCENARIOS.some((s) => s.name === d)).toBe(true);
  });
});

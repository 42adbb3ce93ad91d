// hack/conformance/suite.ts: the default selection of upstream's e2e tests, and how a run is read.
import { comparisonTable, DEFAULT_FOCUS, DEFAULT_SKIPS, familyFocus, familySkips, readReport, skipRegex, summaryLine } from '../hack/conformance/suite';

const spec = (texts: string[], leaf: string, state: string, runTimeNs: number, message?: string) => ({
  ContainerHierarchyTexts: texts,
  LeafNodeText: leaf,
  LeafNodeType: 'It',
  State: state,
  RunTime: runTimeNs,
  ...(message === undefined ? {} : { Failure: { Message: message } }),
});

// The shape of ginkgo v2's --json-report: one suite, its spec reports (suite nodes among them).
const report = JSON.stringify([
  {
    SuiteDescription: 'Kubernetes e2e suite',
    SpecReports: [
      { LeafNodeType: 'SynchronizedBeforeSuite', State: 'passed', RunTime: 5e9 },
      spec(['[sig-network] Services'], 'should serve a basic endpoint from pods [Conformance]', 'passed', 12e9),
      spec(['[sig-network] Services'], 'should be able to switch session affinity for NodePort service', 'failed', 90e9, 'timed out waiting\nmore lines'),
      spec(['[sig-network] Services'], 'should work after the service has been recreated', 'skipped', 1e6, 'Requires at least 2 nodes (not 1)'),
      // Left out by --focus/--skip: no run time, no message.
      spec(['[sig-storage] CSI'], 'should mount', 'skipped', 0),
      spec(['[sig-network] Services'], 'should have session affinity work for LoadBalancer service', 'skipped', 0),
      spec(['[sig-network] Networking'], 'should function for pod-Service: http', 'timedout', 900e9, 'A suite timeout occurred'),
    ],
  },
]);

describe('conformance suite selection', () => {
  const focus = new RegExp(DEFAULT_FOCUS);
  const skip = new RegExp(skipRegex());

  test.each([
    ['[sig-network] Services should serve multiport endpoints from pods  [Conformance]', true],
    ['[sig-network] Services should be able to create a functioning NodePort service [Conformance]', true],
    ['[sig-network] DNS should provide DNS for services  [Conformance]', true],
    ['[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]', true],
    ['[sig-network] Networking Granular Checks: Services should function for pod-Service: http', true],
    ['[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]', false],
    ['[sig-apps] Deployment deployment should support rollover [Conformance]', false],
  ])('focus on %s: %s', (name, selected) => {
    expect(focus.test(name) && !skip.test(name)).toBe(selected);
  });

  test.each([
    '[sig-network] Services should have session affinity work for LoadBalancer service with ESIPP on [Slow] [LinuxOnly]',
    '[sig-network] Services should work after restarting kube-proxy [Disruptive]',
    '[sig-network] Services [Feature:TopologyHints] should distribute endpoints evenly',
  ])('default skip: %s', (name) => {
    expect(skip.test(name)).toBe(true);
  });

  test('every default skip has a reason and compiles; extra skips are added, not replacing', () => {
    for (const s of DEFAULT_SKIPS) {
      expect(s.reason.length).toBeGreaterThan(10);
      expect(() => new RegExp(s.pattern)).not.toThrow();
    }
    const withExtra = new RegExp(skipRegex('session affinity'));
    expect(withExtra.test('[sig-network] Services should have session affinity work for service with type clusterIP')).toBe(true);
    expect(withExtra.test('x [Disruptive]')).toBe(true);
    // ExternalName services need no outside address: not caught by the ExternalIP skip.
    expect(new RegExp(skipRegex()).test('[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]')).toBe(false);
  });
});

describe('the wide profile', () => {
  const focus = new RegExp(familyFocus('ipv4', 'wide'));
  const skip = new RegExp(skipRegex(undefined, 'ipv4', 'wide'));
  const runs = (name: string) => focus.test(name) && !skip.test(name);

  test.each([
    '[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service',
    '[sig-network] KubeProxy should set TCP CLOSE_WAIT timeout [Privileged]',
    '[sig-network] Networking should check kube-proxy urls',
    '[sig-network] DNS should provide DNS for ExternalName services [Conformance]',
    '[sig-network] HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol [LinuxOnly] [Conformance]',
    '[sig-network] EndpointSlice should support a Service with multiple ports specified in multiple EndpointSlices',
    '[sig-network] Services should have session affinity timeout work for NodePort service [LinuxOnly] [Slow]',
    '[sig-network] Networking Granular Checks: Services should update endpoints: udp [Slow]',
  ])('runs %s', (name) => {
    expect(runs(name)).toBe(true);
  });

  test.each([
    '[sig-network] Services should work after restarting kube-proxy [Disruptive]',
    '[sig-network] LoadBalancers should be able to change the type and ports of a TCP service [Slow]',
    '[sig-network] Services [Feature:TopologyHints] should distribute endpoints evenly',
    '[sig-network] Netpol NetworkPolicy between server and client should enforce policy to allow traffic only from a pod in a different namespace based on its namespace selector [Feature:NetworkPolicy]',
    '[sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]',
  ])('still leaves out %s', (name) => {
    expect(runs(name)).toBe(false);
  });

  test('the default profile is unchanged, and the wide one only drops the [Slow] and [Serial] skips', () => {
    expect(familyFocus('ipv4', 'default')).toBe(DEFAULT_FOCUS);
    expect(familySkips('ipv4', 'default')).toBe(DEFAULT_SKIPS);
    expect(DEFAULT_SKIPS.filter((s) => !familySkips('ipv4', 'wide').includes(s)).map((s) => s.pattern)).toEqual([String.raw`\[Serial\]`, String.raw`\[Slow\]`]);
    // On a dual-stack cluster the wide profile keeps the dual-stack tests as the default one does.
    expect(new RegExp(familyFocus('dual', 'wide')).test('[sig-network] [Feature:IPv6DualStack] should create service with ipv4,v6 cluster ip')).toBe(true);
    expect(() => familyFocus('ipv4', 'huge' as never)).toThrow(/profile: huge is not one of default, wide/);
  });
});

describe('conformance report', () => {
  test('counts what ran: passed, failed (timeouts too), skipped by the spec itself; not specs left out by the filters', () => {
    const specs = readReport(report);
    expect(specs.map((s) => [s.outcome, s.name])).toEqual([
      ['failed', '[sig-network] Networking should function for pod-Service: http'],
      ['failed', '[sig-network] Services should be able to switch session affinity for NodePort service'],
      ['passed', '[sig-network] Services should serve a basic endpoint from pods [Conformance]'],
      ['skipped', '[sig-network] Services should work after the service has been recreated'],
    ]);
    expect(specs[1].message).toBe('timed out waiting');
    expect(summaryLine(specs)).toBe('1 passed, 2 failed, 1 skipped');
  });

  test('an empty run reads as zeros', () => {
    expect(summaryLine(readReport(JSON.stringify([{ SpecReports: null }])))).toBe('0 passed, 0 failed, 0 skipped');
  });

  test('the comparison table has a row per test any run selected and a total per run', () => {
    const a = readReport(report);
    const b = a.filter((s) => s.outcome === 'passed');
    const table = comparisonTable([{ name: 'upstream', specs: a }, { name: 'nft', specs: b }]).trim().split('\n');
    expect(table[0]).toBe('| test | upstream | nft |');
    expect(table).toContain('| [sig-network] Services should serve a basic endpoint from pods [Conformance] | passed | passed |');
    expect(table).toContain('| [sig-network] Services should work after the service has been recreated | skipped | - |');
    expect(table[table.length - 1]).toBe('| **total** | 1 passed, 2 failed, 1 skipped | 1 passed, 0 failed, 0 skipped |');
  });
});

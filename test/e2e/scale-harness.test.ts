// bench:scale's harness, end to end on a small profile (20 kwok nodes, 450 pods): the real
// kube-apiserver, kube-controller-manager (the EndpointSlices), kube-scheduler and kwok; kpng as
// kube-proxy's drop-in in a network namespace of its own for the one real node. The load runs its
// four phases; after each, the node's kernel (read with nft, never from kpng) must hold what the API
// says; the figures the report needs must be there. Then the check must fail when the proxy stops
// following the API. The large profiles are benches (npm run bench:scale), not tests.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Lab } from '../../bench/vs-upstream/lab';
import { Kube } from '../../bench/scale/kube';
import { planLoad } from '../../bench/scale/load-plan';
import { profileFor } from '../../bench/scale/profile';
import { runProxy } from '../../bench/scale/run-proxy';
import { checkKernels } from '../../bench/scale/check';
import { createNamespaces, runOperations, waitSettled } from '../../bench/scale/load';
import { writeReport, type ProxyResult } from '../../bench/scale/report';
import { createLabNode, LAB_NODE, labKube, labProxy, startLabProxy } from '../../bench/scale/lab';
import type { ProxyTarget } from '../../bench/scale/targets';
import { gated, need } from '../helpers/gate';
import { startControlPlane, type ControlPlane } from './support/controlplane';
import { clusterBinDir, SCALE_BINARIES, startKwokCluster, type KwokCluster } from './support/kwok-cluster';

const binsBuilt = (): boolean => { try { const d = clusterBinDir(); return SCALE_BINARIES.every((b) => fs.existsSync(path.join(d, b))); } catch { return false; } };
const { describe: d } = gated(...need.netns(), need.built(path.join(__dirname, '..', '..', 'dist', 'src', 'cli', 'main.js')),
  need.that('kube-controller-manager, kube-scheduler and kwok', binsBuilt(), 'run `make scale-bins` (hack/cluster/build.sh --scale)'));

d('bench:scale harness on 20 kwok nodes', () => {
  let cp: ControlPlane;
  let kwok: KwokCluster;
  let lab: Lab;
  let kube: Kube;
  let target: ProxyTarget;
  let result: ProxyResult;
  const log = (m: string) => process.stderr.write(`[scale-harness] ${m}\n`);

  beforeAll(async () => {
    cp = await startControlPlane({ keepAlive: true });
    kwok = await startKwokCluster(cp, 20, log);
    // The one real node: a Node object (no kubelet) in zone-a, whose proxy is kpng in a namespace.
    await createLabNode(cp);
    ({ lab, target } = await startLabProxy(labProxy('nft', () => { throw new Error('no upstream here'); }), cp, 'ksh'));
    kube = labKube(cp);
  }, 300_000);

  afterAll(async () => {
    kube?.close();
    await lab?.stop();
    await kwok?.stop();
    await cp?.stop();
  }, 60_000);

  test('the four phases leave the kernel as the API says, with the figures of the report', async () => {
    const plan = planLoad(profileFor(20, 40), 7, 'ksh');
    expect(plan.profile.pods).toBe(450);
    result = await runProxy(kube, plan, 'kpng nft', 1, [target], { checkTimeoutMs: 60_000, sampleEveryMs: 2000, log });
    expect(result.failures).toEqual([]);
    expect(result.checks.map((c) => c.phase)).toEqual(['create', 'scale', 'update', 'delete']);
    for (const c of result.checks) {
      expect({ phase: c.phase, mismatches: c.mismatches, examples: c.examples }).toEqual({ phase: c.phase, mismatches: 0, examples: [] });
    }
    // After create, every Service of the plan (and `kubernetes`) has its ports in the kernel.
    const servicePorts = plan.services.reduce((n, s) => n + (s.features.multiPort ? 3 : 1), 0);
    expect(result.checks[0].servicePorts).toBe(servicePorts + 1);
    // The SLI comes from kpng's own histogram; the own share from outside it.
    expect(result.sli.count).toBeGreaterThan(0);
    expect(Number.isFinite(result.sli.p99)).toBe(true);
    expect(result.own.count).toBeGreaterThan(0);
    expect(result.own.missed).toBe(0);
    expect(result.cpuS).toBeGreaterThan(0);
    expect(result.peakMiB).toBeGreaterThan(0);
    expect(result.generations).toBeGreaterThan(0);
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ksh-report-'));
    try {
      writeReport(out, { command: 'test', date: new Date().toISOString(), profile: '20 nodes', seed: 7, kwokNodes: 20, results: [result] });
      const md = fs.readFileSync(path.join(out, 'report.md'), 'utf8');
      expect(md).toContain('API vs kernel mismatches after update | 0 of');
      expect(JSON.parse(fs.readFileSync(path.join(out, 'report.json'), 'utf8')).results[0].checks).toHaveLength(4);
      expect(fs.readFileSync(path.join(out, 'latency.svg'), 'utf8')).toContain('<polyline');
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  }, 900_000);

  test('the kernel check fails when the proxy no longer follows the API', async () => {
    await lab.stopProxy();
    const plan = planLoad(profileFor(1, 40), 8, 'ksh-stale'); // 2 Services, 3 Deployments of 5 pods
    await createNamespaces(kube, plan);
    await runOperations(kube, plan.phases[0]);
    await waitSettled(kube, plan, 'create', 120_000);
    const check = await checkKernels(kube, [target], 'stale', 3000);
    expect(check.mismatches).toBeGreaterThan(0);
    expect(check.examples.join('\n')).toContain(LAB_NODE.name);
  }, 300_000);
});


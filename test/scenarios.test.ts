// Golden scenarios: each test/scenarios/*.yaml (a cluster that changes step by step) against its .golden
// file (after each step: the ENLS, the nft table, the socket-LB maps, IPVS). The steps run
// incrementally through the real model and the backends' real sync paths over their fakes; after each
// step every backend's state must also equal a full render of the same ENLS, and the last step must
// leave nothing behind. KPNG_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing them,
// never in CI or a strict run (test/scenarios/README.md).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { formatDump, stateObject } from '../src/sink/dump';
import {
  anySlotOrder, ebpfFull, freshEnls, goldenMode, goldenPath, ipvsFull, nftFullContent, readScenario, runScenario,
  scenarioFiles, SCENARIOS, socketLBPlan, type Scenario, type StepResult,
} from './helpers/scenario';
import { tableContent } from '../src/backend/nft/fake';
import type { Item } from '../src/model/enls';
import type { Obj } from './helpers/k8s';

let mode: 'compare' | 'update' = 'compare';
let refused: Error | undefined;
try { mode = goldenMode(); } catch (e) { refused = e as Error; }

test('golden files are rewritten only outside CI and strict runs', () => {
  if (refused) throw refused;
});

test('there are at least 10 scenarios, each with its golden file', () => {
  const files = scenarioFiles();
  expect(files.length).toBeGreaterThanOrEqual(10);
  if (mode === 'update') return;
  const missing = files.map(goldenPath).filter((g) => !fs.existsSync(g));
  expect(missing.map((g) => `${g} (KPNG_UPDATE_GOLDEN=1 writes it)`)).toEqual([]);
});

const enlsText = (node: string, items: Item[]) => formatDump('yaml', stateObject(node, 0, items));
/** IPVS kernel lines with draining real servers (w0) left out and firewall marks unnamed (each dataplane numbers its own). */
const serving = (lines: string[]) => lines
  .map((l) => l.replace(/fwm\/(ip6?)\/\d+/, 'fwm/$1/MARK').replace(/(, )?\S+ w0/g, '').replace(/-> , /, '-> '))
  .sort();

/** After a step: what the incremental path left equals a full render of the same ENLS, backend by backend. */
async function expectSameAsFull(s: Scenario, step: number, r: StepResult, live: Obj[]): Promise<void> {
  const at = `step ${step}`;
  expect({ at, enls: enlsText(s.node, r.items) }).toEqual({ at, enls: enlsText(s.node, freshEnls(s, live)) });
  const full = nftFullContent(r.services, r.node);
  expect({ at, ip: tableContent(r.nft.ip), ip6: tableContent(r.nft.ip6) }).toEqual({ at, ...full });
  expect({ at, ebpf: anySlotOrder(r.ebpf) }).toEqual({ at, ebpf: anySlotOrder(await ebpfFull(r.services, r.node)) });
  expect({ at, ebpf: anySlotOrder(r.ebpf) }).toEqual({ at, ebpf: anySlotOrder(socketLBPlan(r.services, r.node)) });
  expect({ at, ipvs: serving(r.ipvsKernel) }).toEqual({ at, ipvs: serving(await ipvsFull(r.services, r.node)) });
}

/** The last step removed every Service and EndpointSlice: nothing of them is left anywhere. */
function expectEmpty(r: StepResult, live: Obj[]): void {
  expect(live.filter((o) => o.kind !== 'Node').map((o) => `${String(o.kind)} ${JSON.stringify(o.metadata)}`)).toEqual([]);
  expect(r.services).toEqual([]);
  const content = (t: StepResult['nft']) => ({ ip: tableContent(t.ip), ip6: tableContent(t.ip6) });
  expect(content(r.nft)).toEqual(content(r.nftBase));
  expect(r.ebpf).toEqual([]);
  expect(r.ipvsKernel).toEqual([]);
}

describe.each(scenarioFiles().map((f) => path.basename(f)))('%s', (name) => {
  const file = path.join(SCENARIOS, name);

  test('each step equals a full render of its ENLS, the last leaves nothing, the golden file matches', async () => {
    const s = readScenario(file);
    let affinitySets = new Set<string>();
    const { text, results } = await runScenario(s, async (step, r, live) => {
      await expectSameAsFull(s, step, r, live);
      // Session affinity survives every sync, full ones too: a set that was there keeps its clients.
      const lost = r.affinity.filter((l) => l.includes(': no client') && affinitySets.has(l.split(':')[0]!));
      expect({ step, lost }).toEqual({ step, lost: [] });
      affinitySets = new Set(r.affinity.map((l) => l.split(':')[0]!));
      if (step === s.steps.length) expectEmpty(r, live);
    });
    expect(results).toHaveLength(s.steps.length);
    // The diff path ran: some step after the first was an incremental sync of every backend.
    for (const b of ['nft', 'ebpf', 'ipvs'] as const) {
      expect([b, results.slice(1).some((r) => r.sync[b] === 'incremental')]).toEqual([b, true]);
    }
    if (mode === 'update') { fs.writeFileSync(goldenPath(file), text); return; }
    expect(text).toBe(fs.readFileSync(goldenPath(file), 'utf8'));
  });
});

test('a change to a step shows in the golden text', async () => {
  // The same scenario with one endpoint less in its first step renders differently (the comparison can fail).
  const file = scenarioFiles()[0]!;
  const s = readScenario(file);
  const withEndpoints = (o: Obj) => o.kind === 'EndpointSlice' && Array.isArray(o.endpoints) && o.endpoints.length > 0;
  const slices = (s.steps[0]!.apply ?? []).filter(withEndpoints);
  expect(slices.length).toBeGreaterThan(0);
  (slices[0]!.endpoints as unknown[]).pop();
  expect((await runScenario(s)).text).not.toBe((await runScenario(readScenario(file))).text);
});

test.each(['nft', 'ebpf', 'ipvs'] as const)('a lost %s sync shows: its state no longer equals the full render', async (backend) => {
  // The comparison with a full render can fail: the backend misses step 2 of a scenario whose step 2
  // changes every backend's state.
  const file = scenarioFiles().find((f) => f.endsWith('terminating-fallback.yaml'))!;
  const s = readScenario(file);
  const failures: string[] = [];
  await runScenario(s, async (step, r, live) => {
    try { await expectSameAsFull(s, step, r, live); } catch { failures.push(`step ${step}`); }
  }, { [backend]: [3] });
  expect(failures).toContain('step 3');
});

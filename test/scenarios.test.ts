// Golden scenarios: each test/scenarios/*.yaml (a cluster) against its .golden file (the ENLS, the nft
// table, the socket-LB maps, the IPVS plan). A change in any of them shows as a diff a reviewer reads;
// KPNG_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing (test/scenarios/README.md).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { goldenPath, readScenario, renderScenario, scenarioFiles } from './helpers/scenario';

const update = process.env.KPNG_UPDATE_GOLDEN === '1';

test('there are scenarios, each with its golden file', () => {
  const files = scenarioFiles();
  expect(files.length).toBeGreaterThan(0);
  if (!update) for (const f of files) expect(fs.existsSync(goldenPath(f)) ? path.basename(goldenPath(f)) : `missing: ${goldenPath(f)} (KPNG_UPDATE_GOLDEN=1 writes it)`).toBe(path.basename(goldenPath(f)));
});

test.each(scenarioFiles().map((f) => path.basename(f)))('%s', (name) => {
  const file = path.join(path.dirname(goldenPath(scenarioFiles()[0])), name);
  const text = renderScenario(readScenario(file));
  if (update) { fs.writeFileSync(goldenPath(file), text); return; }
  expect(text).toBe(fs.readFileSync(goldenPath(file), 'utf8'));
});

test('a change to the planned state shows in the golden text', () => {
  // The same cluster with one endpoint less renders differently (the comparison can fail).
  const file = scenarioFiles()[0];
  const s = readScenario(file);
  const slices = s.objects.filter((o) => o.kind === 'EndpointSlice' && Array.isArray(o.endpoints) && (o.endpoints as unknown[]).length > 0);
  expect(slices.length).toBeGreaterThan(0);
  (slices[0].endpoints as unknown[]).pop();
  expect(renderScenario(s)).not.toBe(renderScenario(readScenario(file)));
});

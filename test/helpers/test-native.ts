// Loader of the test addon (build/Release/kpng_test_native.node, from test/native/; built beside the
// product addon by hack/build-native.sh, never packed): the full nftables listing with sets and
// elements, and the libnftnl ids the encoder is checked against. Product code never loads it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NftElementInfo, NftSetInfo, RawChainListing } from '../../src/native';

/** A set as the test addon lists it: numbers where the decoded listing has names. */
export type RawSet = Omit<NftSetInfo, 'family' | 'elements'> & {
  family: number;
  elements: (Omit<NftElementInfo, 'verdict'> & { verdictCode?: number; chain?: string; flags?: number })[];
};
export interface RawListing extends RawChainListing { sets: RawSet[] }

export interface TestAddon {
  /** One table: chains, sets (with their elements unless `elements` is false), rules. */
  nftList(family: number, table: string, elements: boolean, netns?: string): Promise<RawListing>;
  /** libnftnl's attribute ids, from the headers the addons were compiled with. */
  constants: Record<string, number>;
}

/** The repository root, whether this runs from test/helpers (jest) or dist/test/helpers (the guest). */
const ROOT = path.resolve(__dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`), '../..');
export const TEST_ADDON = path.join(ROOT, 'build', 'Release', 'kpng_test_native.node');

let addon: TestAddon | undefined;

/** Loads the test addon; throws saying how to build it. */
export function loadTestNative(): TestAddon {
  if (addon) return addon;
  if (!fs.existsSync(TEST_ADDON)) {
    throw new Error(`the test addon ${path.relative(ROOT, TEST_ADDON)} is not built: run \`make native\` or \`hack/build-native.sh\``);
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  addon = require(TEST_ADDON) as TestAddon;
  return addon;
}

// The aggregator's flags, shared by --to nft, ebpf and ipvs: parsed, validated, refused elsewhere.
import { registerBuiltinBackends } from '../backend/builtin';
import { getBackend } from '../backend/registry';
import { parseCli } from '../cli/args';
import { AGGREGATOR_FLAGS, aggregatorFlags } from './flags';

registerBuiltinBackends();

test('every kernel backend takes the same aggregator flags; other backends refuse them', () => {
  for (const to of ['nft', 'ebpf', 'ipvs']) {
    for (const f of AGGREGATOR_FLAGS) expect(getBackend(to)!.flags).toContain(f);
    const o = parseCli(['file', '--input', 's.yaml', '--to', to, '--aggregator', '--aggregator-min-interval', '2s', '--aggregator-burst', '1']);
    expect(aggregatorFlags(o.backendFlags)).toEqual({ enabled: true, listen: undefined, minIntervalMs: 2000, burst: 1 });
  }
  expect(() => parseCli(['file', '--input', 's.yaml', '--to', 'routes', '--aggregator'])).toThrow(/--aggregator applies to --to nft, not --to routes/);
  expect(aggregatorFlags(parseCli(['file', '--input', 's.yaml', '--to', 'ipvs']).backendFlags)).toEqual({ enabled: false, listen: undefined, minIntervalMs: 100, burst: 3 });
});

test('bad values are clear errors', () => {
  expect(() => aggregatorFlags({ aggregator: true, 'aggregator-min-interval': 'soon' })).toThrow('--aggregator-min-interval: "soon" is not a duration');
  expect(() => aggregatorFlags({ aggregator: true, 'aggregator-burst': '0' })).toThrow('--aggregator-burst: "0" is not a whole number >= 1');
  expect(() => aggregatorFlags({ 'aggregator-listen': 'unix:///tmp/a.sock' })).toThrow('--aggregator-listen needs --aggregator');
});

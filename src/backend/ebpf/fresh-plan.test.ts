// A fresh plan (a node's first start) writes what planService plans for each service, with ids
// counted up in service order, services left out when they no longer fit, in batches of whole
// services in the safe order.
import type { EbpfMapGroup } from '../../native/ebpf';
import { node, variedServices } from '../../../test/helpers/ebpf-services';
import { BACKEND_MAP, ByteWriter, SVC_KEY_SIZE, SVC_VALUE_SIZE } from './maps';
import { CHUNK_ENTRIES, FreshPlan, type FreshResult } from './fresh-plan';
import type { Service } from '../../model/enls';
import { fitsIn, planEntries, planService, writePlanIds, type Ids } from './plan';

interface Maps { heads: Map<string, string>; slots: Map<string, number>; backends: Map<number, string> }
const empty = (): Maps => ({ heads: new Map(), slots: new Map(), backends: new Map() });

/** What planService plans for each service in turn, as EbpfDataplane's planIfFits leaves services out. */
function reference(services: Service[], capacity: number) {
  let b = 1, s = 1, entries = 0;
  const ids: Ids = { backend: () => b++, service: () => s++ };
  const maps = empty(), planned = new ByteWriter(), left: number[] = [];
  services.forEach((svc, i) => {
    if (!fitsIn(svc, node, capacity - entries)) { left.push(i); return; }
    const p = planService(svc, ids, node);
    entries += p.entries;
    writePlanIds(p, planned);
    const e = planEntries(p);
    for (const [k, v] of e.heads) maps.heads.set(k, v);
    for (const [k, v] of e.slots) maps.slots.set(k, v);
    for (const [k, v] of e.backends) maps.backends.set(k, v);
  });
  return { maps, ids: planned.text(), left, nextBackend: b, nextService: s };
}

/** The batches applied to maps keyed as planEntries keys them; each batch's groups in the safe order. */
function applied(batches: EbpfMapGroup[][]): Maps {
  const maps = empty();
  for (const groups of batches) {
    const order = groups.map((g) => (g.map === BACKEND_MAP ? 'be' : g.keys.readUInt16LE(20) === 0 ? 'head' : 'slot'));
    expect(order).toEqual((['be', 'slot', 'head'] as const).filter((x) => order.includes(x)));
    for (const g of groups) {
      for (let i = 0; i < g.count; i++) {
        const v = g.values!.subarray(i * SVC_VALUE_SIZE, (i + 1) * SVC_VALUE_SIZE);
        if (g.map === BACKEND_MAP) { maps.backends.set(g.keys.readUInt32LE(i * 4), v.toString('latin1')); continue; }
        const k = g.keys.toString('latin1', i * SVC_KEY_SIZE, (i + 1) * SVC_KEY_SIZE);
        if (k.charCodeAt(20) === 0 && k.charCodeAt(21) === 0) maps.heads.set(k, v.toString('latin1'));
        else maps.slots.set(k, v.readUInt32LE(0));
      }
    }
  }
  return maps;
}

function fresh(services: Service[], capacity: number): { batches: EbpfMapGroup[][]; result: FreshResult } {
  const plan = new FreshPlan({ node, capacity, firstBackend: 1, firstService: 1, services: services.length });
  const batches: EbpfMapGroup[][] = [];
  for (const s of services) if (plan.add(s)) batches.push(plan.take().groups);
  batches.push(plan.take().groups);
  return { batches: batches.filter((b) => b.length > 0), result: plan.result() };
}

const idsText = (r: FreshResult) => Buffer.from(r.ids).toString('latin1');

test('each service as planService plans it, ids counted up in service order, in batches of whole services', () => {
  const services = variedServices(3000);
  const want = reference(services, 1 << 20);
  const got = fresh(services, 1 << 20);
  expect(got.batches.length).toBeGreaterThan(1);
  for (const b of got.batches.slice(0, -1)) expect(b.reduce((n, g) => n + g.count, 0)).toBeGreaterThanOrEqual(CHUNK_ENTRIES);
  expect(applied(got.batches)).toEqual(want.maps);
  expect(idsText(got.result)).toBe(want.ids);
  expect(got.result).toMatchObject({ nextBackend: want.nextBackend, nextService: want.nextService });
  let heads = 0;
  for (let i = 0; i < services.length; i++) heads += got.result.counts[3 * i]!;
  expect(heads).toBe(want.maps.heads.size);
});

test('services whose entries no longer fit are left out, the others planned', () => {
  const services = variedServices(300);
  const want = reference(services, 500), got = fresh(services, 500);
  expect(want.left.length).toBeGreaterThan(0);
  expect(Array.from({ length: services.length }, (_, i) => i).filter((i) => got.result.counts[3 * i]! < 0)).toEqual(want.left);
  expect(applied(got.batches)).toEqual(want.maps);
  expect(idsText(got.result)).toBe(want.ids);
});

test('a plan given more or fewer services than announced fails', () => {
  const plan = new FreshPlan({ node, capacity: 100, firstBackend: 1, firstService: 1, services: 1 });
  expect(() => plan.result()).toThrow('given 0');
  plan.add(variedServices(1)[0]!);
  expect(() => plan.add(variedServices(1)[0]!)).toThrow('was given more');
});

test('a batch claiming a service address an earlier batch holds waits for the batches before it', () => {
  // Service 2 of the varied set has two external IPs; a later service given the same ones claims them.
  const first = variedServices(3000);
  const twin = { ...first[2]!, name: 'twin', namespace: 'other' };
  const plan = new FreshPlan({ node, capacity: 1 << 20, firstBackend: 1, firstService: 1, services: first.length + 1 });
  const flags: boolean[] = [];
  for (const s of [...first, twin]) if (plan.add(s)) flags.push(plan.take().afterEarlier);
  flags.push(plan.take().afterEarlier);
  expect(flags.length).toBeGreaterThanOrEqual(2);
  // Only the last batch (the twin's) claims addresses of an earlier one.
  expect(flags).toEqual([...flags.slice(0, -1).map(() => false), true]);
});

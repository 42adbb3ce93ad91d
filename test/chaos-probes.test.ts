// hack/chaos/probes.ts: the client pods' lines parsed, attempts summed per probe, repair and the
// marker's catch-up measured from the fault.
import { markerSeen, parseProbeLine, summarize, total, type ProbeEvent } from '../hack/chaos/probes';

const ev = (t: number, probe: string, ok: boolean, detail?: string): ProbeEvent => ({ t, probe, ok, ...(detail ? { detail } : {}) });

describe('chaos probes', () => {
  test('client lines: ok, fail with a reason, the marker with the pod that answered; anything else ignored', () => {
    expect(parseProbeLine('1765140000.123456 tcp ok', 'kc-node1')).toEqual({ t: 1765140000.123456, probe: 'pod@kc-node1 tcp', ok: true });
    expect(parseProbeLine('1765140000.5 tcp fail curl-28', 'kc-node2')).toEqual({ t: 1765140000.5, probe: 'pod@kc-node2 tcp', ok: false, detail: 'curl-28' });
    expect(parseProbeLine('1765140001.0 long fail broken', 'n')).toMatchObject({ probe: 'pod@n long', ok: false, detail: 'broken' });
    expect(parseProbeLine('1765140001.0 marker chaos-mark-b', 'n')).toEqual({ t: 1765140001, probe: 'pod@n marker', ok: true, detail: 'chaos-mark-b' });
    expect(parseProbeLine('1765140001.0 marker none', 'n')).toMatchObject({ ok: false, detail: 'none' });
    expect(parseProbeLine('1765140001.0 udp maybe', 'n')).toBeUndefined();
    expect(parseProbeLine('bash: line 3: curl: command not found', 'n')).toBeUndefined();
  });

  test('per probe: attempts in the window only, failures, first failure and repair from the fault', () => {
    const events = [
      ev(99, 'a', false), // before the window
      ev(100, 'a', true), ev(101, 'a', true), ev(102, 'a', false, 'timeout'), ev(103, 'a', false), ev(103.5, 'a', false, 'timeout'), ev(104.5, 'a', true), ev(106, 'a', true),
      ev(100, 'b', true), ev(105, 'b', true),
      ev(100, 'c', true), ev(103, 'c', false), // never back in the window
      ev(100, 'pod@n marker', false, 'none'), // the marker is not a probe of the data path
      ev(200, 'a', false), // after the window
    ];
    const s = summarize(events, 100, 110, 101.5);
    expect(s.map((x) => x.probe)).toEqual(['a', 'b', 'c']);
    expect(s[0]).toEqual({ probe: 'a', attempted: 7, failed: 3, firstFailure: 0.5, repair: 3, unrepaired: false, reasons: 'timeout ×2, fail ×1' });
    expect(s[1]).toEqual({ probe: 'b', attempted: 2, failed: 0, unrepaired: false });
    expect(s[2]).toMatchObject({ failed: 1, unrepaired: true });
    expect(s[2].repair).toBeUndefined();
    expect(total(s)).toEqual({ attempted: 11, failed: 4, repair: 3, unrepaired: true });
    expect(total([])).toEqual({ attempted: 0, failed: 0, unrepaired: false });
  });

  test('events arriving out of order are ordered before the repair is found', () => {
    const s = summarize([ev(105, 'x', true), ev(102, 'x', false), ev(101, 'x', true), ev(104, 'x', false)], 100, 110, 100);
    expect(s[0]).toMatchObject({ failed: 2, firstFailure: 2, repair: 5 });
  });

  test("the marker: the first answer from the pod it moved to, on that node, after `since`", () => {
    const events = [
      ev(10, 'pod@n1 marker', true, 'chaos-mark-a'), ev(11, 'pod@n1 marker', true, 'chaos-mark-b'),
      ev(12.5, 'pod@n1 marker', true, 'chaos-mark-b'), ev(11.2, 'pod@n2 marker', true, 'chaos-mark-b'),
    ];
    expect(markerSeen(events, 'n1', 'chaos-mark-b', 10.5, 20)).toBeCloseTo(0.5);
    expect(markerSeen(events, 'n1', 'chaos-mark-b', 12, 20)).toBeCloseTo(0.5);
    expect(markerSeen(events, 'n2', 'chaos-mark-b', 10, 20)).toBeCloseTo(1.2);
    expect(markerSeen(events, 'n1', 'chaos-mark-b', 13, 20)).toBeUndefined();
    expect(markerSeen(events, 'n1', 'chaos-mark-a', 10.5, 20)).toBeUndefined();
  });
});

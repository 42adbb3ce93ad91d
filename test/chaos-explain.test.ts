// hack/chaos/explain.ts: each failure placed beside the proxy's outages and the churn's scale-downs.
import { describeFailures, failureContexts } from '../hack/chaos/explain';
import type { ProbeEvent } from '../hack/chaos/probes';

const ev = (t: number, ok: boolean, probe = 'host→kc-node1 NodePort', detail?: string): ProbeEvent => ({ t, probe, ok, ...(detail ? { detail } : {}) });

describe('chaos failure contexts', () => {
  const outages = [{ at: 100, back: 105 }, { at: 130 }];
  const scales = [{ t: 90, replicas: 3 }, { t: 96, replicas: 1 }, { t: 102, replicas: 3 }, { t: 108, replicas: 1 }];

  test('a failure while the proxy was down, after a scale-down', () => {
    const [c] = failureContexts([ev(101, true), ev(103, false, 'pod@kc-node1 udp')], outages, scales);
    expect(c.sinceKill).toBeCloseTo(3);
    expect(c.proxyDown).toBe(true);
    expect(c.sinceScaleDown).toBeCloseTo(7);
    expect(describeFailures([c])).toEqual(['failure pod@kc-node1 udp: 3.0 s after the last kill, proxy not serving yet, 7.0 s after the last scale-down']);
  });

  test('serving again once /healthz answered; never back means down until the end', () => {
    const cs = failureContexts([ev(131, false), ev(110, false, 'x', 'timeout')], outages, scales);
    expect(cs.map((c) => c.event.t)).toEqual([110, 131]);
    expect(cs[0].proxyDown).toBe(false);
    expect(cs[0].sinceScaleDown).toBeCloseTo(2);
    expect(cs[1].proxyDown).toBe(true);
    expect(describeFailures([cs[0]])[0]).toBe('failure x (timeout): 10.0 s after the last kill, proxy serving, 2.0 s after the last scale-down');
  });

  test('before any kill or scale-down', () => {
    const [c] = failureContexts([ev(50, false)], outages, scales);
    expect(c).toEqual({ event: ev(50, false), proxyDown: false });
    expect(describeFailures([c])[0]).toMatch(/- after the last kill, proxy serving, - after/);
  });
});

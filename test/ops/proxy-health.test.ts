// ProxyHealth with a hand-moved clock: upstream's rules (healthy while starting, unhealthy when a queued
// update is older than the timeout, per family, node eligibility only in /healthz) and kpng's revision
// awareness (an update queued during a sync stays pending after it).
import { goTime, ProxyHealth } from '../../src/health/proxy-health';
import { healthTimeoutMs, OpsServers } from '../../src/cli/ops';
import type { OpsOptions } from '../../src/cli/kube-proxy-flags';
import { silentLogger } from '../../src/util/log';
import { cluster } from '../helpers/k8s';

function clocked(timeout = 1000) {
  let now = 1_700_000_000_000;
  const h = new ProxyHealth(timeout, () => now);
  return { h, tick: (ms: number) => { now += ms; } };
}

test('healthy while starting up, even with a queued update', () => {
  const { h, tick } = clocked();
  h.queued('IPv4', 1);
  tick(5000);
  expect(h.report(false).code).toBe(200);
  expect(h.report(false).body.status).toBeUndefined();
});

test('a queued update older than the timeout makes that family and the whole proxy unhealthy', () => {
  const { h, tick } = clocked();
  h.updated('IPv4', 1);
  h.updated('IPv6', 1);
  h.queued('IPv6', 2);
  tick(999);
  expect(h.report(false).code).toBe(200);
  tick(1);
  const r = h.report(false);
  expect(r.code).toBe(503);
  expect(r.body.healthy).toBe(false);
  expect(r.body.status).toEqual({ IPv4: { lastUpdated: expect.any(String), healthy: true }, IPv6: { lastUpdated: expect.any(String), healthy: false } });
  h.updated('IPv6', 2);
  expect(h.report(false).code).toBe(200);
});

test('an update queued while a sync ran stays pending after that sync', () => {
  const { h, tick } = clocked();
  h.updated('IPv4', 1);
  h.queued('IPv4', 2);
  tick(500);
  h.queued('IPv4', 3); // arrives while revision 2 is being applied
  h.updated('IPv4', 2);
  expect(h.oldestPending('IPv4')).toBeDefined();
  tick(999);
  expect(h.report(false).code).toBe(200);
  tick(1);
  expect(h.report(false).code).toBe(503);
  h.updated('IPv4', 3);
  expect(h.oldestPending('IPv4')).toBeUndefined();
});

test('/healthz adds node eligibility; /livez ignores it', () => {
  const { h } = clocked();
  h.updated('IPv4', 1);
  h.setNodeEligible(false);
  const hz = h.report(true);
  expect(hz.code).toBe(503);
  expect(hz.body.nodeEligible).toBe(false);
  expect(hz.body.healthy).toBe(true); // the proxy itself is fine
  const lz = h.report(false);
  expect(lz.code).toBe(200);
  expect('nodeEligible' in lz.body).toBe(false);
});

test('the body has upstream\'s fields in upstream\'s order, times as Go writes them', () => {
  const { h } = clocked();
  h.updated('IPv4', 1);
  expect(Object.keys(h.report(true).body)).toEqual(['lastUpdated', 'currentTime', 'nodeEligible', 'healthy', 'status']);
  expect(goTime(0)).toBe('0001-01-01T00:00:00Z');
  expect(goTime(Date.UTC(2024, 0, 2, 3, 4, 5, 120))).toBe('2024-01-02T03:04:05.12Z');
  expect(goTime(Date.UTC(2024, 0, 2, 3, 4, 5, 0))).toBe('2024-01-02T03:04:05Z');
});

test('health timeout: twice the sync period, at most twice kube-proxy\'s default of 30 s', () => {
  expect(healthTimeoutMs(1000)).toBe(2000);
  expect(healthTimeoutMs(30000)).toBe(60000);
  expect(healthTimeoutMs(3600000)).toBe(60000);
});

describe('node eligibility before the Node is seen (upstream: NodeEligible() is false while its node manager has no Node)', () => {
  const opsOptions: OpsOptions = { metricsBindAddress: null, healthzBindAddress: null, bindAddressHardFail: false, conntrack: null, oomScoreAdj: undefined };
  const ctx = { node: 'n1', backend: { name: 'trace' }, syncPeriodMs: 1000, once: false, log: silentLogger, version: 'test' };
  const nodeObject = (name: string, extra: object = {}) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name, ...extra } });

  test('a source that delivers Node objects: 503 on /healthz until this node\'s Node arrives, /livez 200 throughout', () => {
    const ops = new OpsServers(opsOptions, ctx);
    expect(ops.health.report(true)).toMatchObject({ code: 503, body: { nodeEligible: false, healthy: true } });
    expect(ops.health.report(false).code).toBe(200);
    ops.observeObject('Node', nodeObject('n2'), false); // another node's object changes nothing
    expect(ops.health.report(true).code).toBe(503);
    ops.observeObject('Node', nodeObject('n1'), false);
    expect(ops.health.report(true)).toMatchObject({ code: 200, body: { nodeEligible: true } });
    ops.observeObject('Node', nodeObject('n1', { deletionTimestamp: '2026-01-01T00:00:00Z' }), false);
    expect(ops.health.report(true)).toMatchObject({ code: 503, body: { nodeEligible: false } });
    expect(ops.health.report(false).code).toBe(200);
  });

  test('the local API source (no Node objects): eligible from the start', () => {
    const ops = new OpsServers(opsOptions, { ...ctx, nodeObjects: false });
    expect(ops.health.report(true)).toMatchObject({ code: 200, body: { nodeEligible: true } });
  });

  test('every family is listed from the start of the sink (as upstream\'s SyncLoop marks them updated), before any sync', () => {
    const ops = new OpsServers(opsOptions, { ...ctx, nodeObjects: false });
    const c = cluster('n1', []);
    ops.attach(c.state, { name: 'never', apply: () => new Promise<void>(() => {}) });
    const r = ops.health.report(true);
    expect(r.code).toBe(200);
    expect(r.body.status).toEqual({ IPv4: { lastUpdated: expect.any(String), healthy: true }, IPv6: { lastUpdated: expect.any(String), healthy: true } });
  });
});

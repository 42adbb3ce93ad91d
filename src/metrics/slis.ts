// The metrics port's own health: /healthz with component-base's one default check (ping: the server
// answers), and the SLI metrics its answers feed, served on /metrics/slis as kube-proxy serves them
// (kubernetes_healthcheck, kubernetes_healthchecks_total, process_start_time_seconds; DELETE resets
// them). The proxy's health (syncs, node eligibility) is the health server's (--healthz-bind-address).
import type http from 'node:http';
import type * as Prom from 'prom-client';
import { Counter, Gauge, Registry } from './prom';

export type HealthcheckStatus = 'success' | 'error';

export interface SliMetrics {
  readonly registry: Prom.Registry;
  /** One check's result, for an endpoint (`type`: healthz). */
  observe(name: string, type: string, status: HealthcheckStatus): void;
  /** Forgets every check's results (DELETE /metrics/slis). */
  reset(): void;
}

export function createSliMetrics(startTimeSeconds = Math.round(Date.now() / 1000 - process.uptime())): SliMetrics {
  const registry = new Registry();
  const r = [registry];
  const healthcheck = new Gauge({ name: 'kubernetes_healthcheck', help: 'This metric records the result of a single healthcheck.', labelNames: ['name', 'type'] as const, registers: r });
  const total = new Counter({ name: 'kubernetes_healthchecks_total', help: 'This metric records the results of all healthcheck.', labelNames: ['name', 'type', 'status'] as const, registers: r });
  new Gauge({ name: 'process_start_time_seconds', help: 'Start time of the process since unix epoch in seconds.', registers: r }).set(startTimeSeconds);
  return {
    registry,
    observe(name, type, status) {
      healthcheck.labels(name, type).set(status === 'success' ? 1 : 0);
      total.labels(name, type, status).inc();
    },
    reset() {
      healthcheck.reset();
      total.reset();
    },
  };
}

/** A named check; an Error says why it fails. */
export interface HealthCheck { name: string; check(): Error | undefined }

/** component-base's default when a server installs no check of its own. */
export const PING: HealthCheck = { name: 'ping', check: () => undefined };

const TEXT = { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' };

/**
 * Serves `path` if it is /healthz or /healthz/<check>, as component-base's healthz handler answers:
 * "ok"; with ?verbose one line per check; ?exclude=NAME skips a check; a failure is a 500 naming the
 * checks, the reason withheld (it is logged upstream; kpng has no failing check). Returns false for
 * any other path.
 */
export function serveHealthz(path: string, query: URLSearchParams, res: http.ServerResponse, slis: SliMetrics, checks: readonly HealthCheck[] = [PING]): boolean {
  const one = checks.find((c) => path === `/healthz/${c.name}`);
  if (one) {
    const err = one.check();
    if (err) res.writeHead(500, TEXT).end(`internal server error: ${err.message}\n`);
    else res.writeHead(200, TEXT).end('ok');
    return true;
  }
  if (path !== '/healthz') return false;
  const excluded = new Set(query.getAll('exclude'));
  const unknown = new Set(excluded);
  let lines = '';
  let failed = false;
  for (const c of checks) {
    if (excluded.has(c.name)) { unknown.delete(c.name); lines += `[+]${c.name} excluded: ok\n`; continue; }
    const err = c.check();
    slis.observe(c.name, 'healthz', err ? 'error' : 'success');
    if (err) failed = true;
    lines += err ? `[-]${c.name} failed: reason withheld\n` : `[+]${c.name} ok\n`;
  }
  if (unknown.size) lines += `warn: some health checks cannot be excluded: no matches for ${[...unknown].sort().map((n) => JSON.stringify(n)).join(',')}\n`;
  if (failed) res.writeHead(500, TEXT).end(`${lines}healthz check failed\n`);
  else res.writeHead(200, TEXT).end(query.has('verbose') ? `${lines}healthz check passed\n` : 'ok');
  return true;
}

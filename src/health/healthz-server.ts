// kube-proxy's health server (--healthz-bind-address, default 0.0.0.0:10256): /healthz (readiness:
// proxy health and node eligibility) and /livez (liveness: proxy health only), JSON bodies as upstream.
import http from 'node:http';
import type { ProxyHealth } from './proxy-health';

export interface HealthzCounters {
  /** Called with "200" or "503" for each answer (kubeproxy_proxy_healthz_total / _livez_total). */
  healthz?(code: string): void;
  livez?(code: string): void;
}

export function createHealthzServer(health: ProxyHealth, counters: HealthzCounters = {}): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/healthz' && path !== '/livez') {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' }).end('404 page not found\n');
      return;
    }
    const withNode = path === '/healthz';
    const { code, body } = health.report(withNode);
    (withNode ? counters.healthz : counters.livez)?.(String(code));
    res.writeHead(code, { 'Content-Type': 'application/json', 'X-Content-Type-Options': 'nosniff' });
    res.end(req.method === 'HEAD' ? undefined : JSON.stringify(body));
  });
}

// kube-proxy's metrics server (--metrics-bind-address, default 127.0.0.1:10249): /metrics in the
// Prometheus text format, /proxyMode (the mode, in kube-proxy's words), /configz (the effective
// configuration under its API group, as component-base's configz handler serves it), and /healthz and
// /metrics/slis (the server's own health and its SLI metrics: slis.ts).
import http from 'node:http';
import type { Registry } from 'prom-client';
import { createSliMetrics, serveHealthz, type SliMetrics } from './slis';

/** The key /configz files kube-proxy's configuration under (kubeproxyconfig.GroupName). */
export const CONFIGZ_GROUP = 'kubeproxy.config.k8s.io';

export interface MetricsServerOptions {
  registry: Registry;
  /** What /proxyMode answers (proxy-mode.ts). */
  proxyMode: string;
  /** The effective KubeProxyConfiguration (v1alpha1, with apiVersion and kind), read on each /configz. */
  configz: () => unknown;
  /** Values read from the pipeline rather than pushed by it, refreshed before each /metrics. */
  beforeScrape?: () => void;
  /** /metrics/slis and what /healthz feeds (a registry of its own when not given). */
  slis?: SliMetrics;
}

const NOSNIFF = { 'X-Content-Type-Options': 'nosniff' };

/** A registry's text exposition, or a 500 saying why it could not be made. */
function serveRegistry(registry: Registry, res: http.ServerResponse): void {
  registry.metrics().then(
    (text) => { res.writeHead(200, { 'Content-Type': registry.contentType }).end(text); },
    (e: Error) => { res.writeHead(500, { 'Content-Type': 'text/plain' }).end(`${e.message}\n`); },
  );
}

export function createMetricsServer(o: MetricsServerOptions): http.Server {
  const slis = o.slis ?? createSliMetrics();
  return http.createServer((req, res) => {
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const path = q < 0 ? target : target.slice(0, q);
    if (path === '/metrics') {
      o.beforeScrape?.();
      serveRegistry(o.registry, res);
      return;
    }
    if (path === '/metrics/slis') {
      // As component-base's handler with reset: DELETE forgets the SLIs, anything else reads them.
      if (req.method === 'DELETE') { slis.reset(); res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('metrics reset\n'); return; }
      serveRegistry(slis.registry, res);
      return;
    }
    if (serveHealthz(path, new URLSearchParams(q < 0 ? '' : target.slice(q + 1)), res, slis)) return;
    if (path === '/proxyMode') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', ...NOSNIFF }).end(o.proxyMode);
      return;
    }
    if (path === '/configz') {
      let body: string;
      try {
        body = JSON.stringify({ [CONFIGZ_GROUP]: o.configz() });
      } catch (e) {
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8', ...NOSNIFF }).end(`error marshaling json: ${(e as Error).message}\n`);
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json', ...NOSNIFF }).end(body);
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', ...NOSNIFF }).end('404 page not found\n');
  });
}

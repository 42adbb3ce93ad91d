// kube-proxy's metrics server (--metrics-bind-address, default 127.0.0.1:10249): /metrics in the
// Prometheus text format, /proxyMode (the mode, in kube-proxy's words) and /configz (the effective
// configuration under its API group, as component-base's configz handler serves it).
import http from 'node:http';
import type { Registry } from 'prom-client';

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
}

const NOSNIFF = { 'X-Content-Type-Options': 'nosniff' };

export function createMetricsServer(o: MetricsServerOptions): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      o.beforeScrape?.();
      o.registry.metrics().then(
        (text) => { res.writeHead(200, { 'Content-Type': o.registry.contentType }).end(text); },
        (e: Error) => { res.writeHead(500, { 'Content-Type': 'text/plain' }).end(`${e.message}\n`); },
      );
      return;
    }
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
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
  });
}

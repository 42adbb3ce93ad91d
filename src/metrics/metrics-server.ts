// kube-proxy's metrics server (--metrics-bind-address, default 127.0.0.1:10249): /metrics in the
// Prometheus text format, and /proxyMode (the backend's name, as kube-proxy answers its mode).
import http from 'node:http';
import type { Registry } from 'prom-client';

export function createMetricsServer(registry: Registry, proxyMode: string, beforeScrape: () => void = () => {}): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      beforeScrape();
      registry.metrics().then(
        (text) => { res.writeHead(200, { 'Content-Type': registry.contentType }).end(text); },
        (e: Error) => { res.writeHead(500, { 'Content-Type': 'text/plain' }).end(`${e.message}\n`); },
      );
      return;
    }
    if (path === '/proxyMode') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end(proxyMode);
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
  });
}

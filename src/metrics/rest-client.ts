// client-go's rest_client metrics (component-base/metrics/prometheus/restclient: same names, labels and
// buckets), fed by the kube source's transport through its RequestObserver: the source needs no metrics.
import type { RequestObserver } from '../source/kube/http';
import type * as Prom from 'prom-client';
import { Counter, Histogram } from './prom';

/** client-go's request latency buckets, seconds. */
const LATENCY_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

export interface RestClientMetrics extends RequestObserver {
  readonly requests: Prom.Counter<'code' | 'method' | 'host'>;
  readonly duration: Prom.Histogram<'verb' | 'host'>;
}

export function createRestClientMetrics(registry: Prom.Registry): RestClientMetrics {
  const r = [registry];
  const requests = new Counter({ name: 'rest_client_requests_total', help: 'Number of HTTP requests, partitioned by status code, method, and host.', labelNames: ['code', 'method', 'host'] as const, registers: r });
  const duration = new Histogram({ name: 'rest_client_request_duration_seconds', help: 'Request latency in seconds. Broken down by verb, and host.', labelNames: ['verb', 'host'] as const, buckets: LATENCY_BUCKETS, registers: r });
  return {
    requests,
    duration,
    result: (code, method, host) => requests.labels(code, method, host).inc(),
    latency: (verb, host, seconds) => duration.labels(verb, host).observe(seconds),
  };
}

// client-go's rest_client metrics (component-base/metrics/prometheus/restclient: same names, labels and
// buckets), fed by the kube source's transport through its RequestObserver: the source needs no metrics.
// What kpng's client has no counterpart for is still registered, with the same type and labels, so that
// dashboards and alerts find the families; each says below why it does not move.
import type { RequestObserver } from '../source/kube/http';
import type * as Prom from 'prom-client';
import { Counter, Gauge, Histogram } from './prom';

/** client-go's request latency buckets, seconds. */
const LATENCY_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];
/** client-go's DNS latency buckets: the request's without the last. */
const DNS_BUCKETS = LATENCY_BUCKETS.slice(0, -1);
/** client-go's request and response size buckets, bytes: 64 B to 16 MiB. */
const SIZE_BUCKETS = [64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216];
/** client-go's exec plugin certificate rotation buckets: 10 minutes to 4 years, seconds. */
const ROTATION_BUCKETS = [600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000];

export interface RestClientMetrics extends RequestObserver {
  readonly requests: Prom.Counter<'code' | 'method' | 'host'>;
  readonly duration: Prom.Histogram<'verb' | 'host'>;
  readonly requestSize: Prom.Histogram<'verb' | 'host'>;
  readonly responseSize: Prom.Histogram<'verb' | 'host'>;
  readonly rateLimiter: Prom.Histogram<'verb' | 'host'>;
  readonly dns: Prom.Histogram<'host'>;
  readonly transportCreates: Prom.Counter<'result'>;
  readonly transportEntries: Prom.Gauge;
}

export function createRestClientMetrics(registry: Prom.Registry): RestClientMetrics {
  const r = [registry];
  const vh = ['verb', 'host'] as const;
  const requests = new Counter({ name: 'rest_client_requests_total', help: 'Number of HTTP requests, partitioned by status code, method, and host.', labelNames: ['code', 'method', 'host'] as const, registers: r });
  const duration = new Histogram({ name: 'rest_client_request_duration_seconds', help: 'Request latency in seconds. Broken down by verb, and host.', labelNames: vh, buckets: LATENCY_BUCKETS, registers: r });
  const requestSize = new Histogram({ name: 'rest_client_request_size_bytes', help: 'Request size in bytes. Broken down by verb and host.', labelNames: vh, buckets: SIZE_BUCKETS, registers: r });
  const responseSize = new Histogram({ name: 'rest_client_response_size_bytes', help: 'Response size in bytes. Broken down by verb and host.', labelNames: vh, buckets: SIZE_BUCKETS, registers: r });
  const dns = new Histogram({ name: 'rest_client_dns_resolution_duration_seconds', help: 'DNS resolver latency in seconds. Broken down by host.', labelNames: ['host'] as const, buckets: DNS_BUCKETS, registers: r });
  // RequestObserver.rateLimited: the kube source's limiter (source/kube/rate-limit.ts) tells each wait
  // (0 when a token was there); none with --kube-api-qps negative (no limiter).
  const rateLimiter = new Histogram({ name: 'rest_client_rate_limiter_duration_seconds', help: 'Client side rate limiter latency in seconds. Broken down by verb, and host.', labelNames: vh, buckets: LATENCY_BUCKETS, registers: r });
  // client-go retries a request in place when the server says Retry-After; kpng's transport never does
  // (a failed request ends its list or watch, and the reflector starts again after a backoff, which
  // client-go does not count as a retry either), so this stays without samples.
  new Counter({ name: 'rest_client_request_retries_total', help: 'Number of request retries, partitioned by status code, verb, and host.', labelNames: ['code', 'verb', 'host'] as const, registers: r });
  // client-go caches its TLS transports by configuration ("hit" for a configuration seen before); kpng
  // builds one transport per API server target and keeps it: every creation is a "miss", and the
  // entries are the transports made.
  const transportCreates = new Counter({ name: 'rest_client_transport_create_calls_total', help: 'Number of calls to get a new transport, partitioned by the result of the operation hit: obtained from the cache, miss: created and added to the cache, miss-gc: recreated and added back to the cache after being garbage collected, uncacheable: created and not cached', labelNames: ['result'] as const, registers: r });
  const transportEntries = new Gauge({ name: 'rest_client_transport_cache_entries', help: 'Number of transport entries in the internal cache.', registers: r });
  // Exec credential plugins run inside @kubernetes/client-node, which tells kpng nothing about their
  // calls or certificates: the TTL is client-go's value when no plugin manages a certificate (+Inf),
  // the rotation histogram stays empty, as client-go's does without plugin certificates.
  new Gauge({ name: 'rest_client_exec_plugin_ttl_seconds', help: 'Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec plugin. The value is in seconds until certificate expiry (negative if already expired). If auth exec plugins are unused or manage no TLS certificates, the value will be +INF.', registers: r }).set(Infinity);
  new Histogram({ name: 'rest_client_exec_plugin_certificate_rotation_age', help: 'Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated. If auth exec plugin client certificates are unused, histogram will contain no data.', buckets: ROTATION_BUCKETS, registers: r });
  new Counter({ name: 'rest_client_exec_plugin_call_total', help: 'Number of calls to an exec plugin, partitioned by the type of event encountered (no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and an optional exit code. The exit code will be set to 0 if and only if the plugin call was successful.', labelNames: ['code', 'call_status'] as const, registers: r });
  new Counter({ name: 'rest_client_exec_plugin_policy_call_total', help: 'Number of comparisons of an exec plugin to the plugin policy and allowlist (if any), partitioned by whether or not the policy permits the plugin', labelNames: ['allowed', 'denied'] as const, registers: r });
  // client-go reloads a CA file that changed and collects unused cached transports; kpng reads its CA
  // once per transport and never drops one: nothing to count.
  new Counter({ name: 'rest_client_transport_ca_reload_total', help: 'Number of times a CA reload is attempted, partitioned by the result and reason for the reload attempt', labelNames: ['result', 'reason'] as const, registers: r });
  new Counter({ name: 'rest_client_transport_cert_rotation_gc_calls_total', help: 'Number of times a cert rotation goroutine cancel func is called via GC cleanup of the associated transport', registers: r });
  new Counter({ name: 'rest_client_transport_cache_gc_calls_total', help: 'Number of times a GC cleanup attempts to delete a transport cache entry, partitioned by the result: deleted, skipped', labelNames: ['result'] as const, registers: r });
  return {
    requests,
    duration,
    requestSize,
    responseSize,
    rateLimiter,
    dns,
    transportCreates,
    transportEntries,
    result: (code, method, host) => requests.labels(code, method, host).inc(),
    latency: (verb, host, seconds) => duration.labels(verb, host).observe(seconds),
    requestBytes: (verb, host, bytes) => requestSize.labels(verb, host).observe(bytes),
    responseBytes: (verb, host, bytes) => responseSize.labels(verb, host).observe(bytes),
    resolved: (host, seconds) => dns.labels(host).observe(seconds),
    rateLimited: (verb, host, seconds) => rateLimiter.labels(verb, host).observe(seconds),
    transportCreated: () => { transportCreates.labels('miss').inc(); transportEntries.inc(); },
  };
}

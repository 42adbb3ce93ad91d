// Families kube-proxy serves only because its binary links libraries of the API server (audit,
// envelope encryption, declarative validation, webhooks, discovery aggregation), which register them
// in component-base's global registry as they load. None counts anything a proxy does: kube-proxy
// serves them at 0 for its whole life, and so does kpng, so that a scrape of either has the same names.
import type * as Prom from 'prom-client';
import { Counter, Gauge, Histogram, exponentialBuckets } from './prom';

const COUNTERS: Record<string, string> = {
  aggregator_discovery_aggregation_count_total: 'Counter of number of times discovery was aggregated',
  apiserver_audit_event_total: 'Counter of audit events generated and sent to the audit backend.',
  apiserver_audit_requests_rejected_total: 'Counter of apiserver requests rejected due to an error in audit logging backend.',
  apiserver_storage_data_key_generation_failures_total: 'Total number of failed data encryption key(DEK) generation operations.',
  apiserver_storage_envelope_transformation_cache_misses_total: 'Total number of cache misses while accessing key decryption key(KEK).',
  apiserver_validation_declarative_validation_mismatch_total: 'Number of times declarative validation results differed from handwritten validation results for core types.',
  apiserver_validation_declarative_validation_panic_total: 'Number of times declarative validation has panicked during validation.',
  apiserver_validation_duplicate_validation_error_total: 'Number of duplicate validation errors during validation.',
  apiserver_webhooks_x509_insecure_sha1_total: 'Counts the number of requests to servers with insecure SHA1 signatures in their serving certificate OR the number of connection failures due to the insecure SHA1 signatures (either/or, based on the runtime environment)',
  apiserver_webhooks_x509_missing_san_total: 'Counts the number of requests to servers missing SAN extension in their serving certificate OR the number of connection failures due to the lack of x509 certificate SAN extension missing (either/or, based on the runtime environment)',
};

export function registerLinkedApiserverMetrics(registry: Prom.Registry): void {
  const r = [registry];
  for (const [name, help] of Object.entries(COUNTERS)) new Counter({ name, help, registers: r });
  new Gauge({ name: 'apiserver_envelope_encryption_dek_cache_fill_percent', help: 'Percent of the cache slots currently occupied by cached DEKs.', registers: r });
  // The API server's buckets: 5 µs doubling to ~41 ms.
  new Histogram({ name: 'apiserver_storage_data_key_generation_duration_seconds', help: 'Latencies in seconds of data encryption key(DEK) generation operations.', buckets: exponentialBuckets(5e-6, 2, 14), registers: r });
}

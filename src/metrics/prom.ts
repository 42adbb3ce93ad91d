// The parts of prom-client kpng uses, loaded from its lib/ files instead of its index: the index also
// loads the push gateway (https, tls and zlib), the cluster aggregator and Summary's t-digest, none of
// which kpng uses, on the path of every start. Types come from the index.
/* eslint-disable @typescript-eslint/no-require-imports */
import type * as Prom from 'prom-client';

export const Registry: typeof Prom.Registry = require('prom-client/lib/registry');
export const Counter: typeof Prom.Counter = require('prom-client/lib/counter');
export const Gauge: typeof Prom.Gauge = require('prom-client/lib/gauge');
export const Histogram: typeof Prom.Histogram = require('prom-client/lib/histogram');
/**
 * prom-client's process and Node.js metrics, loaded on first use: they bring @opentelemetry/api (for
 * process_cpu_seconds_total's exemplars), module loading kpng keeps off its start.
 */
export function collectDefaultMetrics(config: Prom.DefaultMetricsCollectorConfiguration<Prom.RegistryContentType>): void {
  (require('prom-client/lib/defaultMetrics') as typeof Prom.collectDefaultMetrics)(config);
}
const buckets = require('prom-client/lib/bucketGenerators') as Pick<typeof Prom, 'exponentialBuckets' | 'linearBuckets'>;
export const exponentialBuckets = buckets.exponentialBuckets;
export const linearBuckets = buckets.linearBuckets;

// component-base's metrics about metrics: registered_metrics_total (each registered family counted once,
// by stability level and the version it was deprecated in), disabled_metrics_total, hidden_metrics_total
// and cardinality_enforcement_unexpected_categorizations_total.
import type * as Prom from 'prom-client';
import { Counter } from './prom';

export type StabilityLevel = 'INTERNAL' | 'ALPHA' | 'BETA' | 'STABLE';

/** The families upstream declares at another level than ALPHA; kube-proxy's, client-go's and kpng's
 *  own are ALPHA. */
const LEVELS: Record<string, StabilityLevel> = {
  registered_metrics_total: 'BETA',
  disabled_metrics_total: 'BETA',
  hidden_metrics_total: 'BETA',
  kubernetes_feature_enabled: 'BETA',
  kubernetes_healthcheck: 'STABLE',
  kubernetes_healthchecks_total: 'STABLE',
  // linked-apiserver.ts
  apiserver_validation_declarative_validation_mismatch_total: 'BETA',
  apiserver_validation_declarative_validation_panic_total: 'BETA',
  apiserver_validation_duplicate_validation_error_total: 'INTERNAL',
  apiserver_webhooks_x509_insecure_sha1_total: 'BETA',
  apiserver_webhooks_x509_missing_san_total: 'BETA',
};

export const stabilityOf = (family: string): StabilityLevel => LEVELS[family] ?? 'ALPHA';

/** Counts per stability level of the given family names. */
export function countByStability(families: Iterable<string>): Map<StabilityLevel, number> {
  const counts = new Map<StabilityLevel, number>();
  for (const f of families) counts.set(stabilityOf(f), (counts.get(stabilityOf(f)) ?? 0) + 1);
  return counts;
}

/**
 * Registers the four families on `registry`. `families` names every family registered through kpng's
 * metrics (its /metrics and /metrics/slis registries), read at each scrape: prom-client's process and
 * Node.js collectors are the runtime's, as Go's collectors are upstream, and are not counted.
 */
export function registerMetaMetrics(registry: Prom.Registry, families: () => Iterable<string>): void {
  const r = [registry];
  new Counter({
    name: 'registered_metrics_total',
    help: 'The count of registered metrics broken by stability level and deprecation version.',
    labelNames: ['stability_level', 'deprecated_version'] as const,
    registers: r,
    // Families are only ever added: the counts only grow, as a counter must.
    collect() {
      this.reset();
      // No kpng metric is deprecated: the version is always empty.
      for (const [level, n] of countByStability(families())) this.labels(level, '').inc(n);
    },
  });
  // component-base's --disabled-metrics and --show-hidden-metrics-for-version: kube-proxy has the
  // latter, kpng accepts it with no effect, and no kpng metric is deprecated, so none is hidden.
  new Counter({ name: 'disabled_metrics_total', help: 'The count of disabled metrics.', registers: r });
  new Counter({ name: 'hidden_metrics_total', help: 'The count of hidden metrics.', registers: r });
  // Counts label values component-base's cardinality enforcement (--allow-metric-labels) could not
  // classify; kpng has no such enforcement, so nothing is ever miscategorized.
  new Counter({ name: 'cardinality_enforcement_unexpected_categorizations_total', help: 'The count of unexpected categorizations during cardinality enforcement.', registers: r });
}

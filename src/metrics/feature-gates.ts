// kubernetes_feature_enabled{name,stage}, as component-base records a feature gate (1 enabled, 0 not;
// the stage in its words: ALPHA, BETA, DEPRECATED, "" for GA). kpng has no feature gates of its own
// (--feature-gates has no effect: docs/configuration.md), so the gates listed are those kube-proxy
// v1.37's Linux code consults, each with what kpng actually does: 1 where kpng behaves as kube-proxy with
// the gate on. Upstream lists every gate of its binary (kubelet's and the API server's too); those
// say nothing about a proxy and are left out.
import type * as Prom from 'prom-client';
import { Gauge } from './prom';

export type FeatureStage = 'ALPHA' | 'BETA' | 'DEPRECATED' | '';

export interface FeatureGate { name: string; stage: FeatureStage; enabled: boolean }

export const KPNG_FEATURES: readonly FeatureGate[] = [
  { name: 'AllowServiceExternalIPs', stage: '', enabled: true }, // spec.externalIPs are programmed
  { name: 'ComponentFlagz', stage: 'BETA', enabled: false }, // no /flagz on the metrics port
  { name: 'ComponentStatusz', stage: 'BETA', enabled: false }, // no /statusz either
  { name: 'KubeProxyIPVS', stage: 'DEPRECATED', enabled: true }, // --proxy-mode=ipvs runs the IPVS backend
  { name: 'KubeProxyNFTablesLocalhostNodePorts', stage: 'ALPHA', enabled: false }, // node ports are not served on 127.0.0.1
  { name: 'MultiCIDRServiceAllocator', stage: '', enabled: false }, // ServiceCIDR objects are not watched
  { name: 'NativeHistograms', stage: 'BETA', enabled: false }, // prom-client serves classic histograms only
  { name: 'NFTablesNetlink', stage: 'BETA', enabled: true }, // nftables is always programmed through netlink
  { name: 'PreferSameTrafficDistribution', stage: '', enabled: true }, // node hints (PreferSameNode) are honoured
];

export function registerFeatureGates(registry: Prom.Registry, gates: readonly FeatureGate[] = KPNG_FEATURES): void {
  const g = new Gauge({
    name: 'kubernetes_feature_enabled',
    help: 'This metric records the data about the stage and enablement of a k8s feature.',
    labelNames: ['name', 'stage'] as const,
    registers: [registry],
  });
  for (const f of gates) g.labels(f.name, f.stage).set(f.enabled ? 1 : 0);
}

// The IP families an ENLS item concerns, named as Kubernetes names them (the ip_family label, the
// keys of /healthz's "status").
import { IPFamily, type Item } from '../model/enls';
import { ipFamily } from '../model/ip';
import type { IPFamilyName } from '../health/proxy-health';

export function familiesOf(item: Item): IPFamilyName[] {
  const out = new Set<IPFamilyName>();
  for (const sp of item.service?.ports ?? []) out.add(sp.family === IPFamily.IPV6 ? 'IPv6' : 'IPv4');
  for (const a of item.node?.addresses ?? []) { const f = ipFamily(a); if (f) out.add(f); }
  return [...out];
}

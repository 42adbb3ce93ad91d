// The IP families an ENLS item concerns, named as Kubernetes names them (the ip_family label, the
// keys of /healthz's "status").
import { IPFamily, type Item } from './enls';
import { ipFamily } from './ip';
import type { Family } from './objects';

export function familiesOf(item: Item): Family[] {
  const out = new Set<Family>();
  for (const sp of item.service?.ports ?? []) out.add(sp.family === IPFamily.IPV6 ? 'IPv6' : 'IPv4');
  for (const a of item.node?.addresses ?? []) { const f = ipFamily(a); if (f) out.add(f); }
  return [...out];
}

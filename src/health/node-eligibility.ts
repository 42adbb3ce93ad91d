// Whether this node should receive load-balancer traffic, as kube-proxy's /healthz decides it: not
// while the Node is being deleted (deletionTimestamp set, or the object gone) nor while the cluster
// autoscaler has tainted it for deletion.

export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/** Eligibility read from a raw Node object; never throws on a malformed one (treated as eligible). */
export function nodeEligible(raw: unknown): boolean {
  if (typeof raw !== 'object' || raw === null) return true;
  const o = raw as { metadata?: { deletionTimestamp?: unknown }; spec?: { taints?: unknown } };
  if (o.metadata?.deletionTimestamp) return false;
  const taints = o.spec?.taints;
  if (Array.isArray(taints) && taints.some((t) => typeof t === 'object' && t !== null && (t as { key?: unknown }).key === TO_BE_DELETED_TAINT)) return false;
  return true;
}

const nameOf = (raw: unknown): unknown => (typeof raw === 'object' && raw !== null ? (raw as { metadata?: { name?: unknown } }).metadata?.name : undefined);

/** Follows this node's raw Node objects (add/update/delete) and reports eligibility changes. */
export function nodeEligibilityObserver(node: string, set: (eligible: boolean, why: string) => void): (raw: unknown, deleted: boolean) => void {
  let last: boolean | undefined;
  return (raw, deleted) => {
    if (nameOf(raw) !== node) return;
    const eligible = !deleted && nodeEligible(raw);
    if (eligible === last) return;
    last = eligible;
    set(eligible, deleted ? 'the Node was deleted' : eligible ? 'the Node is eligible' : 'the Node is being deleted or is tainted ' + TO_BE_DELETED_TAINT);
  };
}

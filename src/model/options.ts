// The node-wide settings the model needs (kube-proxy's --cluster-cidr, --masquerade-all,
// --nodeport-addresses), validated once, with kube-proxy's defaults.
import { canonicalCIDR } from './ip';

export interface ModelOptions {
  /** Pod network(s), canonical CIDRs: sources inside them are the "pod" client class. */
  clusterCIDRs: string[];
  /** Masquerade every connection to a cluster IP. */
  masqueradeAll: boolean;
  /** Where node ports answer: ['primary'] (the node's primary addresses) or canonical CIDRs. */
  nodePortAddresses: string[];
}

export const DEFAULT_MODEL_OPTIONS: ModelOptions = { clusterCIDRs: [], masqueradeAll: false, nodePortAddresses: ['primary'] };

export class OptionError extends Error {}

function cidrs(list: readonly string[], flag: string): string[] {
  return [...new Set(list.map((c) => {
    const v = canonicalCIDR(c.trim());
    if (!v) throw new OptionError(`${flag}: ${JSON.stringify(c)} is not a CIDR (e.g. 10.244.0.0/16 or fd00:10:244::/56)`);
    return v;
  }))];
}

/** Validates and canonicalizes; throws OptionError naming the flag and the bad value. */
export function modelOptions(raw: Partial<{ clusterCIDRs: readonly string[]; masqueradeAll: boolean; nodePortAddresses: readonly string[] }>): ModelOptions {
  const npa = (raw.nodePortAddresses ?? []).map((s) => s.trim()).filter(Boolean);
  let nodePortAddresses: string[];
  if (npa.length === 0 || (npa.length === 1 && npa[0] === 'primary')) nodePortAddresses = ['primary'];
  else if (npa.includes('primary')) throw new OptionError('--nodeport-addresses: "primary" cannot be combined with CIDRs');
  else nodePortAddresses = cidrs(npa, '--nodeport-addresses');
  return {
    clusterCIDRs: cidrs(raw.clusterCIDRs ?? [], '--cluster-cidr'),
    masqueradeAll: !!raw.masqueradeAll,
    nodePortAddresses,
  };
}

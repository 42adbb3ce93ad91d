// `kpng migrate-check`: before a node moves from kube-proxy to kpng, says what is on the node (read
// from the kernel, src/cleanup/survey.ts), what kpng will run with the same configuration, and what
// changes: for workloads (exit status 1 when anything does) and for operators (rules that disappear
// from iptables, settings kpng does not read). It changes nothing on the node.
import { surveyNode, type NodeSurvey, type Reading, type SurveyChain } from '../cleanup/survey';
import type { ModelOptions } from '../model/options';
import { servesLocalhostNodePorts } from '../model/options';

export interface MigrationInput {
  node: string;
  /** kube-proxy's configuration as given (KubeProxyConfiguration's fields: mode, nodePortAddresses, ...). */
  configuration: Record<string, unknown>;
  /** Where it came from, for the report ("--config FILE" or "flags"). */
  source: string;
  /** The kpng backend the mode maps to, and kpng's model settings for it. */
  backend: string;
  model: Pick<ModelOptions, 'nodePortAddresses' | 'localhostNodePorts'>;
  /** Whether kpng will apply conntrack settings (kube-proxy's invocation). */
  conntrack: boolean;
  /** What kpng says about the configuration at start (settings with no effect, the mode's mapping). */
  warnings: string[];
  survey: NodeSurvey;
}

export interface MigrationReport {
  text: string;
  /** Differences a workload can notice (the exit status is 1 when there is one). */
  workloadChanges: string[];
  operatorChanges: string[];
  /** What to do before the switch. */
  before: string[];
}

const plural = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;

function chainsLine(r: Reading<SurveyChain[]>): string {
  if (!r.ok) return `cannot read (${r.error})`;
  if (r.value.length === 0) return 'none of kube-proxy\'s chains';
  const rules = r.value.reduce((n, c) => n + c.rules, 0);
  const per = new Map<string, number>();
  for (const c of r.value) per.set(`${c.family} ${c.table}`, (per.get(`${c.family} ${c.table}`) ?? 0) + 1);
  return `${plural(r.value.length, 'chain')} of kube-proxy's (${[...per].map(([t, n]) => `${t} ${n}`).join(', ')}), ${plural(rules, 'rule')}`;
}

/** The mode the node's rules show kube-proxy ran in, from what it left. */
export function detectedModes(s: NodeSurvey): string[] {
  const modes: string[] = [];
  if (s.upstreamNftTables.ok && s.upstreamNftTables.value.length) modes.push('nftables');
  const chains = [...(s.iptablesNft.ok ? s.iptablesNft.value : []), ...(s.iptablesLegacy.ok ? s.iptablesLegacy.value : [])];
  const ipvs = chains.some((c) => /^KUBE-(NODE-PORT|LOAD-BALANCER|IPVS-)/.test(c.chain)) || (s.ipvsServices.ok && s.ipvsServices.value > 0);
  if (ipvs) modes.push('ipvs');
  else if (chains.some((c) => c.chain.startsWith('KUBE-SVC-') || c.chain === 'KUBE-SERVICES')) modes.push('iptables');
  return modes;
}

const nodePortText = (list: readonly string[]): string => (list.includes('all')
  ? 'every local address'
  : list.map((a) => (a === 'primary' ? 'the node\'s primary addresses' : a === 'localhost' ? '127.0.0.1' : a)).join(', '));

export function migrationReport(i: MigrationInput): MigrationReport {
  const s = i.survey;
  const mode = String(i.configuration.mode ?? '') || 'iptables';
  const iptablesMode = mode === 'iptables';
  const workload: string[] = [];
  const operator: string[] = [];
  const before: string[] = [];

  const detected = detectedModes(s);
  const found: string[] = [
    `nftables: ${!s.upstreamNftTables.ok ? `cannot read (${s.upstreamNftTables.error})` : s.upstreamNftTables.value.length ? `table ${s.upstreamNftTables.value.join(', ')}` : 'no kube-proxy table'}`
      + (s.kpngNftTables.ok && s.kpngNftTables.value.length ? `; kpng's already there: ${s.kpngNftTables.value.join(', ')}` : ''),
    `iptables-nft: ${chainsLine(s.iptablesNft)}`,
    `iptables-legacy: ${chainsLine(s.iptablesLegacy)}`,
    `IPVS: ${s.ipvsServices.ok ? plural(s.ipvsServices.value, 'virtual service') : `cannot read (${s.ipvsServices.error})`}`,
    `route_localnet: ${s.routeLocalnet ?? 'unreadable'}`,
    `ports 10249 and 10256: ${s.portsInUse.length ? `${s.portsInUse.join(' and ')} in use` : 'free'}`,
  ];

  // Node ports: kpng serves them where the configured mode did.
  const localhost = servesLocalhostNodePorts({ localhostNodePorts: i.model.localhostNodePorts, nodePortAddresses: i.model.nodePortAddresses });
  const plan = [
    `backend ${i.backend}${i.backend === 'nft' || i.backend === 'ebpf' ? ' (nftables tables ip kpng and ip6 kpng)' : ''}`,
    `node ports on ${nodePortText(i.model.nodePortAddresses)}${localhost ? ', and on 127.0.0.1 (route_localnet=1)' : ''}, as kube-proxy's ${mode} mode`,
    'after its first sync, kube-proxy\'s rules are removed: its nftables tables, iptables chains (iptables-nft and iptables-legacy), ipsets'
      + (i.backend === 'ipvs' ? '' : ', IPVS services and kube-ipvs0'),
  ];

  if (detected.length && !detected.includes(mode)) {
    workload.push(`the node's rules are kube-proxy's ${detected.join(' and ')} mode, but the configuration says ${mode}: kpng follows the configuration (check that this is the configuration the node runs)`);
  }
  if (iptablesMode) {
    const chains = [...(s.iptablesNft.ok ? s.iptablesNft.value : []), ...(s.iptablesLegacy.ok ? s.iptablesLegacy.value : [])];
    const rules = chains.reduce((n, c) => n + c.rules, 0);
    operator.push(`kpng's rules are in nftables (nft list table ip kpng), not in iptables: iptables-save, iptables -L and dashboards or alerts that read KUBE-* chains and their counters see ${chains.length ? `the ${plural(chains.length, 'chain')} and ${plural(rules, 'rule')} there now go away` : 'nothing of kpng\'s'}`);
    operator.push('a cluster IP on a port its Service does not define is rejected at once (TCP reset, ICMP port unreachable) instead of timing out, as kube-proxy\'s nftables mode does');
    if (localhost && s.routeLocalnet !== 1 && !s.procSysWritable) {
      workload.push('node ports on 127.0.0.1 will not answer: route_localnet is 0 and this container cannot set it (run kpng --init-only in a privileged init container, as deploy/base does)');
    }
  }
  if (mode === 'ipvs' && i.backend === 'ipvs') operator.push('kpng\'s IPVS backend takes over kube-ipvs0 and the IPVS services; its filtering rules are in the nftables table kpng-ipvs instead of iptables chains and ipsets');
  for (const w of i.warnings) if (w.startsWith('no effect in kpng')) operator.push(w);
  if (s.portsInUse.length) {
    before.push(`port${s.portsInUse.length > 1 ? 's' : ''} ${s.portsInUse.join(' and ')} ${s.portsInUse.length > 1 ? 'are' : 'is'} taken (kube-proxy still running?): kpng's health and metrics servers retry until it stops; stop kube-proxy once kpng's first sync is in (docs/migration.md)`);
  }
  if (!s.procSysWritable && i.conntrack) {
    before.push('/proc/sys is read-only here: kube-proxy\'s conntrack settings (and route_localnet) are applied by kpng --init-only in a privileged init container (deploy/base has one); without it the node keeps what the kernel has after a reboot');
  }
  if (s.kpngNftTables.ok && s.kpngNftTables.value.length) before.push(`kpng's tables are already on the node (${s.kpngNftTables.value.join(', ')}): kpng replaces them at its first sync`);

  const list = (items: string[], none: string) => (items.length ? items.map((x) => `  - ${x}`) : [`  ${none}`]);
  const text = [
    `kpng migrate-check: node ${i.node}, kube-proxy's configuration from ${i.source}: mode ${mode}`,
    '',
    'On the node now:',
    ...found.map((x) => `  ${x}`),
    '',
    'kpng will run:',
    ...plan.map((x) => `  ${x}`),
    '',
    'Changes a workload can notice:',
    ...list(workload, 'none'),
    '',
    'Changes for operators:',
    ...list(operator, 'none'),
    '',
    'Before the switch:',
    ...list(before, 'nothing to do'),
    '',
  ].join('\n');
  return { text, workloadChanges: workload, operatorChanges: operator, before };
}

/** The command: survey this node, print the report; 0 when no workload notices the switch, 1 otherwise. */
export async function runMigrateCheck(i: Omit<MigrationInput, 'survey'>, out: (text: string) => void): Promise<number> {
  const r = migrationReport({ ...i, survey: await surveyNode() });
  out(r.text);
  return r.workloadChanges.length ? 1 : 0;
}

// Golden scenarios (test/scenarios/): a cluster in, what every part of kpng makes of it out, as text a
// reviewer reads. One YAML file per case; its golden file holds the ENLS, the nft table of a full sync
// (both families), the socket-LB maps as a connect() resolves them, and the IPVS plan. No root: each
// backend's planner runs on its own, without its kernel.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { serviceKey, NODE_KEY, type NodeInfo, type Service } from '../../src/model/enls';
import { modelOptions, type RawModelOptions } from '../../src/model/options';
import { formatDump, stateObject } from '../../src/sink/dump';
import { fullSyncOps, TableModel } from '../../src/backend/nft/plan';
import { toNftText } from '../../src/backend/nft/text';
import { planEntries, planService as planSocketLB } from '../../src/backend/ebpf/plan';
import { decodeBackend, decodeSvcKey, decodeSvcValue, FLAG_REFUSE } from '../../src/backend/ebpf/maps';
import { actionName, CLASSES, nodePortAddrs, planService as planIpvs, type Fam } from '../../src/backend/ipvs/plan';
import { cluster, type Obj } from './k8s';

export const SCENARIOS = path.resolve(__dirname, '..', 'scenarios');

/** A scenario file: the node kpng runs for, the model's flags, the objects. */
export interface Scenario {
  /** What the case shows, in a sentence or two. */
  about: string;
  node: string;
  model?: RawModelOptions;
  objects: Obj[];
}

export function readScenario(file: string): Scenario {
  const s = parseYaml(fs.readFileSync(file, 'utf8')) as Scenario;
  if (!s || typeof s.about !== 'string' || typeof s.node !== 'string' || !Array.isArray(s.objects)) {
    throw new Error(`${file}: a scenario needs about (text), node (name) and objects (a list)`);
  }
  return s;
}

const PROTO: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };
const hostPort = (addr: string, port: number) => (addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`);

/** The socket-LB maps of a state, one line per service address as a connect() would resolve it. */
function socketLB(services: Service[], node: NodeInfo | undefined): string {
  const plan = { heads: new Map<string, string>(), slots: new Map<string, number>(), backends: new Map<number, string>() };
  let nextBackend = 1, nextService = 1;
  const serviceIds = new Map<string, number>();
  const ids = { backend: () => nextBackend++, service: (k: string) => serviceIds.get(k) ?? (serviceIds.set(k, nextService), nextService++) };
  for (const svc of services) {
    const p = planEntries(planSocketLB(svc, ids, node));
    for (const [k, v] of p.heads) plan.heads.set(k, v);
    for (const [k, v] of p.slots) plan.slots.set(k, v);
    for (const [k, v] of p.backends) plan.backends.set(k, v);
  }
  const lines: string[] = [];
  for (const [k, v] of plan.heads) {
    const key = decodeSvcKey(Buffer.from(k, 'latin1'));
    const head = decodeSvcValue(Buffer.from(v, 'latin1'));
    const what = `${PROTO[key.proto] ?? key.proto} ${hostPort(key.addr, key.port)}`;
    if (head.flags & FLAG_REFUSE) { lines.push(`${what} -> refused`); continue; }
    const backends: string[] = [];
    for (let slot = 1; slot <= head.count; slot++) {
      const sk = Buffer.from(k, 'latin1');
      sk.writeUInt16LE(slot, 20);
      const id = plan.slots.get(sk.toString('latin1'));
      const b = id === undefined ? undefined : plan.backends.get(id);
      backends.push(b === undefined ? '?' : hostPort(decodeBackend(Buffer.from(b, 'latin1')).addr, decodeBackend(Buffer.from(b, 'latin1')).port));
    }
    lines.push(`${what} -> ${backends.join(', ')}${head.affinitySeconds ? ` (affinity ${head.affinitySeconds}s)` : ''}`);
  }
  return lines.sort().join('\n');
}

/** The IPVS plan: destinations (what the companion table does per client class) and virtual servers. */
function ipvs(services: Service[], node: NodeInfo | undefined): string {
  let mark = 0x10000;
  const marks = new Map<string, number>();
  const localAddrs = node?.addresses ?? [];
  const ctx = { node, localAddrs, markFor: (id: string) => marks.get(id) ?? (marks.set(id, ++mark), mark), nodePortAddrs: { ip: nodePortAddrs(node, 'ip', localAddrs), ip6: nodePortAddrs(node, 'ip6', localAddrs) } as Record<Fam, string[]> };
  const dests: string[] = [], virtuals: string[] = [];
  for (const svc of services) {
    const p = planIpvs(svc, ctx);
    for (const d of p.dests) {
      const classes = CLASSES.map((c) => `${c}=${actionName(d.actions[c])}`).join(' ');
      dests.push(`${d.proto} ${hostPort(d.addr, d.port)}${d.bind ? ' (kube-ipvs0)' : ''}: ${classes}${d.allowed ? ` allowed ${d.allowed.join(',')}` : ''}`);
    }
    for (const v of p.virtuals) {
      const at = v.fwmark !== undefined ? `fwmark ${v.fwmark} (${v.fam})` : `${v.proto} ${hostPort(v.addr, v.port)}`;
      virtuals.push(`${at}${v.persistence ? ` persistent ${v.persistence}s` : ''} -> ${v.endpoints.map((e) => hostPort(e.ip, e.port)).join(', ') || '(none)'}`);
    }
  }
  return ['destinations:', ...dests.sort().map((l) => `  ${l}`), 'virtual servers:', ...virtuals.sort().map((l) => `  ${l}`)].join('\n');
}

/** Everything the scenario's golden file holds, as one text. */
export function renderScenario(s: Scenario): string {
  const { state, warnings } = cluster(s.node, s.objects, { model: modelOptions(s.model ?? {}) });
  const items = [...state.items()];
  const node = items.find((i) => i.key === NODE_KEY)?.node ?? undefined;
  const services = items.flatMap((i) => (i.service ? [i.service] : []));
  const keyed = (): Iterable<[string, Service]> => services.map((svc) => [serviceKey(svc.namespace, svc.name), svc]);
  const nft = (fam: 'ip' | 'ip6') => toNftText(fam, 'kpng', fullSyncOps(new TableModel(fam), keyed(), node)).trimEnd();
  const enls = formatDump('yaml', stateObject(s.node, 1, items)).trimEnd();
  return [
    `# ${s.about.trim().replace(/\n/g, '\n# ')}`,
    '# Made by test/scenarios.test.ts; KPNG_UPDATE_GOLDEN=1 rewrites it (review the diff).',
    '',
    '## warnings',
    warnings.length ? warnings.join('\n') : '(none)',
    '',
    '## enls',
    enls,
    '',
    '## nft ip',
    nft('ip'),
    '',
    '## nft ip6',
    nft('ip6'),
    '',
    '## ebpf socket LB (connect() of this node\'s processes)',
    socketLB(services, node) || '(none)',
    '',
    '## ipvs',
    ipvs(services, node),
    '',
  ].join('\n');
}

export const goldenPath = (scenarioFile: string): string => scenarioFile.replace(/\.yaml$/, '.golden');

/** The scenario files, sorted. */
export function scenarioFiles(): string[] {
  return fs.readdirSync(SCENARIOS).filter((f) => f.endsWith('.yaml')).sort().map((f) => path.join(SCENARIOS, f));
}

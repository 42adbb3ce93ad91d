// Golden scenarios (test/scenarios/): a cluster that moves, step by step, and what every part of kpng
// makes of it after each step, as text a reviewer reads. Each step's objects go through the real model
// (ClusterStore -> NodeState), its batch through the real KernelSinks and Dataplanes of the three kernel
// backends over their fakes (nft tables, BPF maps, IPVS), incrementally after the first step, as kpng
// runs them. No root, no kernel. test/scenarios/README.md describes the files.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { NODE_KEY, type Item, type NodeInfo, type Service } from '../../src/model/enls';
import { modelOptions, type RawModelOptions } from '../../src/model/options';
import { formatDump, stateObject } from '../../src/sink/dump';
import { KernelSink } from '../../src/backend/kernel/kernel-sink';
import { fakeNftKernel, FakeNft, tableContent, type FakeTable } from '../../src/backend/nft/fake';
import { NftDataplane } from '../../src/backend/nft/sink';
import { toNftText } from '../../src/backend/nft/text';
import type { Elem, IpFamily as NftFam, Op } from '../../src/backend/nft/types';
import { EbpfDataplane } from '../../src/backend/ebpf/dataplane';
import { FakeEbpfMaps } from '../../src/backend/ebpf/fake';
import { decodeBackend, decodeSvcKey, decodeSvcValue, FLAG_REFUSE } from '../../src/backend/ebpf/maps';
import { planEntries, planService as planSocketLB, type Ids } from '../../src/backend/ebpf/plan';
import { IpvsDataplane } from '../../src/backend/ipvs/dataplane';
import { FakeIpvsKernel } from '../../src/backend/ipvs/fake';
import { actionName, CLASSES, nodePortAddrs, planService as planIpvs, type IpFamily } from '../../src/backend/ipvs/plan';
import type { ConntrackFilter } from '../../src/native/nft-types';
import type { Subscription } from '../../src/store/subscription';
import { cluster, type Obj } from './k8s';
import { renderFull } from './nft-world';

export const SCENARIOS = path.resolve(__dirname, '..', 'scenarios');

// ---------------------------------------------------------------------------------------------
// The file format.

/** One step: objects added or replaced (whole, as `kubectl apply` leaves them) and objects deleted. */
export interface Step {
  about: string;
  apply?: Obj[];
  /** "Kind namespace/name" (Service, EndpointSlice) or "Node name". */
  delete?: string[];
  /** Then a full resync of the whole state, as kpng's runner does every --sync-period. */
  resync?: boolean;
}

/** A scenario file: the node kpng runs for, the model's flags, the steps. */
export interface Scenario {
  /** What the case shows, in a sentence or two. */
  about: string;
  node: string;
  model?: RawModelOptions;
  steps: Step[];
}

const KINDS = ['Service', 'EndpointSlice', 'Node'] as const;
type Kind = (typeof KINDS)[number];

/** "Kind namespace/name" -> its parts (a Node has no namespace). */
export function parseRef(ref: string): { kind: Kind; namespace?: string; name: string } {
  const m = /^(\w+) (?:([\w.-]+)\/)?([\w.-]+)$/.exec(ref);
  const kind = m?.[1] as Kind | undefined;
  if (!m || !kind || !KINDS.includes(kind) || (kind === 'Node') !== (m[2] === undefined)) {
    throw new Error(`"${ref}": a deleted object is "Service ns/name", "EndpointSlice ns/name" or "Node name"`);
  }
  return { kind, namespace: m[2], name: m[3]! };
}

const refOf = (o: Obj): string => {
  const md = (o.metadata ?? {}) as { namespace?: string; name?: string };
  return o.kind === 'Node' ? `Node ${md.name}` : `${String(o.kind)} ${md.namespace ?? 'default'}/${md.name}`;
};

export function readScenario(file: string): Scenario {
  const s = parseYaml(fs.readFileSync(file, 'utf8')) as Scenario;
  const bad = (why: string) => new Error(`${file}: ${why}`);
  if (!s || typeof s.about !== 'string' || typeof s.node !== 'string' || !Array.isArray(s.steps) || s.steps.length < 2) {
    throw bad('a scenario needs about (text), node (name) and steps (a list of two or more)');
  }
  s.steps.forEach((st, i) => {
    if (typeof st.about !== 'string') throw bad(`step ${i + 1} needs about (text)`);
    for (const o of st.apply ?? []) if (!KINDS.includes(o.kind as Kind)) throw bad(`step ${i + 1}: cannot apply a ${String(o.kind)}`);
    for (const r of st.delete ?? []) parseRef(r);
  });
  if (s.steps[0]!.delete?.length) throw bad('the first step is the initial list: it deletes nothing');
  return s;
}

export const goldenPath = (scenarioFile: string): string => scenarioFile.replace(/\.yaml$/, '.golden');

/** The scenario files, sorted. */
export function scenarioFiles(): string[] {
  return fs.readdirSync(SCENARIOS).filter((f) => f.endsWith('.yaml')).sort().map((f) => path.join(SCENARIOS, f));
}

/**
 * Whether golden files are rewritten (KPNG_UPDATE_GOLDEN=1) or compared. Never rewritten in CI or in a
 * strict run (`make test`): there a rewrite would turn any change of output into a pass.
 */
export function goldenMode(env: NodeJS.ProcessEnv = process.env): 'compare' | 'update' {
  if (env.KPNG_UPDATE_GOLDEN !== '1') return 'compare';
  const strict = [env.CI ? `CI=${env.CI}` : '', env.KPNG_TEST_STRICT ? `KPNG_TEST_STRICT=${env.KPNG_TEST_STRICT}` : ''].filter(Boolean);
  if (strict.length) {
    throw new Error(`KPNG_UPDATE_GOLDEN=1 with ${strict.join(' and ')}: golden files are never rewritten in CI or a strict run; ` +
      'rewrite them locally (KPNG_UPDATE_GOLDEN=1 npx jest test/scenarios.test.ts), review the diff and commit it');
  }
  return 'update';
}

// ---------------------------------------------------------------------------------------------
// A run: the model and the three backends, kept from step to step.

/** What one step left, as the golden file shows it, and what the checks compare. */
export interface StepResult {
  /** How each backend's KernelSink synced this step: full, incremental or none (no ENLS change). */
  sync: Record<'nft' | 'ebpf' | 'ipvs', 'full' | 'incremental' | 'none'>;
  warnings: string[];
  enls: string;
  /** Stale UDP conntrack entries the sink deleted after the step. */
  conntrack: string[];
  nft: Record<NftFam, FakeTable>;
  /** The nft affinity sets, and whether each kept the client entry it had before the step. */
  affinity: string[];
  /** The table of this node with no service (what the services' parts are shown against). */
  nftBase: Record<NftFam, FakeTable>;
  ebpf: string[];
  ipvsDests: string[];
  ipvsKernel: string[];
  services: Service[];
  node: NodeInfo | undefined;
  items: Item[];
}

const FAMS: NftFam[] = ['ip', 'ip6'];
const quiet = () => {};

export class ScenarioRun {
  readonly c: ReturnType<typeof cluster>;
  private readonly sub: Subscription;
  /** Objects the cluster holds, by "Kind ns/name": a fresh model is built from them for the checks. */
  readonly live = new Map<string, Obj>();
  private readonly nftFake = new FakeNft();
  private readonly conntrack: ConntrackFilter[][] = [];
  private readonly nft: KernelSink;
  private readonly loader = new FakeEbpfMaps();
  private readonly ebpf: KernelSink;
  private ipvsFake: FakeIpvsKernel | undefined;
  private ipvs: KernelSink | undefined;
  private warned = 0;
  private step = 0;

  /**
   * `lose`: steps (numbered from 1) whose batch a backend never gets, as if its sync had been lost
   * (only for showing that the checks see it).
   */
  constructor(readonly s: Scenario, private readonly lose: Partial<Record<'nft' | 'ebpf' | 'ipvs', number[]>> = {}) {
    const first = s.steps[0]!.apply ?? [];
    for (const o of first) this.live.set(refOf(o), o);
    this.c = cluster(s.node, first, { model: modelOptions(s.model ?? {}) });
    this.sub = this.c.state.subscribe();
    const conntrackDelete = async (f: ConntrackFilter[]) => { this.conntrack.push(f); return f.length; };
    const nftKernel = { ...fakeNftKernel(this.nftFake), conntrackDelete };
    this.nft = new KernelSink(new NftDataplane('kpng', nftKernel), { log: quiet, conntrackDelete });
    this.ebpf = new KernelSink(new EbpfDataplane(async () => this.loader, quiet), { log: quiet });
  }

  /** The next step: its objects into the store (one round of changes), its batch to every backend. */
  async next(): Promise<StepResult> {
    const st = this.s.steps[this.step++];
    if (!st) throw new Error('no step left');
    if (this.step > 1) {
      for (const o of st.apply ?? []) { this.c.store.apply(o.kind as Kind, o); this.live.set(refOf(o), o); }
      for (const r of st.delete ?? []) {
        const { kind, namespace, name } = parseRef(r);
        if (!this.live.delete(r)) throw new Error(`step ${this.step}: "${r}" is not in the cluster`);
        this.c.store.apply(kind, { metadata: { namespace, name } }, true);
      }
      this.c.store.flush();
      if (st.resync) this.sub.requestReset();
    } else {
      await this.sub.ready(); // the state is synced after the initial list
    }
    this.conntrack.length = 0;
    const sinks = { nft: this.nft, ebpf: this.ebpf, ipvs: this.ipvsSink() };
    const before = Object.fromEntries(Object.entries(sinks).map(([k, s]) => [k, { ...s.stats }]));
    const sync: StepResult['sync'] = { nft: 'none', ebpf: 'none', ipvs: 'none' };
    if (this.sub.pending) {
      const batch = this.sub.take();
      for (const [name, sink] of Object.entries(sinks) as Array<[keyof typeof sinks, KernelSink]>) {
        if (this.lose[name]?.includes(this.step)) continue;
        await sink.apply(batch, this.c.state);
        const was = before[name]!;
        sync[name] = sink.stats.fullSyncs > was.fullSyncs ? 'full' : sink.stats.syncs > was.syncs ? 'incremental' : 'none';
      }
    }
    const r = this.result(sync);
    this.seedAffinity();
    return r;
  }

  /**
   * A client entry in every affinity set, as the datapath adds one when a client connects, so that
   * the next step shows whether the set kept its clients (a resync must not reset affinity).
   */
  private seedAffinity(): void {
    for (const fam of FAMS) {
      for (const set of this.nftFake.tables[fam].sets.values()) {
        if (set.spec.kind === 'affinity' && set.dynamic.size === 0) set.dynamic.set(fam === 'ip' ? '10.244.9.9' : 'fd00:244:9::9', 1);
      }
    }
  }

  /** Each affinity set, and whether the client entry seeded after the previous step is still there. */
  private affinity(): string[] {
    return FAMS.flatMap((fam) => [...this.nftFake.tables[fam].sets].filter(([, s]) => s.spec.kind === 'affinity')
      .map(([name, s]) => `${fam} ${name}: ${s.dynamic.size ? 'client kept' : 'no client (a new set, or its clients were lost)'}`)).sort();
  }

  /** The IPVS backend's kernel fake knows the node's addresses, so it is made once the node is known. */
  private ipvsSink(): KernelSink {
    if (this.ipvs) return this.ipvs;
    this.ipvsFake = new FakeIpvsKernel(this.c.state.get(NODE_KEY)?.node?.addresses ?? []);
    this.ipvs = new KernelSink(ipvsDataplane(this.ipvsFake), { log: quiet });
    return this.ipvs;
  }

  private result(sync: StepResult['sync']): StepResult {
    const items = [...this.c.state.items()];
    const node = items.find((i) => i.key === NODE_KEY)?.node ?? undefined;
    const services = items.flatMap((i) => (i.service ? [i.service] : []));
    const warnings = this.c.warnings.slice(this.warned);
    this.warned = this.c.warnings.length;
    return {
      sync, warnings, items, services, node,
      enls: formatDump('yaml', stateObject(this.s.node, this.c.state.revision, items)).trimEnd(),
      conntrack: this.conntrack.flat().map((f) => JSON.stringify(f)).sort(),
      nft: this.nftFake.tables,
      affinity: this.affinity(),
      nftBase: renderFull([], node).tables,
      ebpf: socketLB(this.loader),
      ipvsDests: ipvsDestinations(services, node),
      ipvsKernel: this.ipvsFake!.text(),
    };
  }

  close(): void { this.sub.close(); }
}

const ipvsDataplane = (fake: FakeIpvsKernel) => new IpvsDataplane({
  scheduler: 'rr', interface: 'kube-ipvs0', table: 'kpng-ipvs', drainCheckMs: 0, log: quiet, kernel: fake, paths: fake,
});

// ---------------------------------------------------------------------------------------------
// Renderers.

const PROTO: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };
const hostPort = (addr: string, port: number) => (addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`);

/**
 * The socket-LB maps, one line per service address as a connect() resolves it: its backends in slot
 * order. A backend no slot names, or a slot naming no backend, shows as such (neither should exist).
 */
export function socketLB(m: FakeEbpfMaps): string[] {
  const lines: string[] = [];
  const used = new Set<number>();
  for (const [k, v] of m.svc) {
    const key = decodeSvcKey(Buffer.from(k, 'hex'));
    if (key.slot !== 0) continue;
    const head = decodeSvcValue(v);
    const what = `${PROTO[key.proto] ?? key.proto} ${hostPort(key.addr, key.port)}`;
    if (head.flags & FLAG_REFUSE) { lines.push(`${what} -> refused`); continue; }
    const backends: string[] = [];
    for (let slot = 1; slot <= head.count; slot++) {
      const sk = Buffer.from(k, 'hex');
      sk.writeUInt16LE(slot, 20);
      const s = m.svc.get(sk.toString('hex'));
      const id = s && decodeSvcValue(s).backendId;
      const b = id === undefined ? undefined : m.be.get(id);
      if (id !== undefined) used.add(id);
      backends.push(b ? hostPort(decodeBackend(b).addr, decodeBackend(b).port) : `missing slot ${slot}`);
    }
    lines.push(`${what} -> ${backends.join(', ')}${head.affinitySeconds ? ` (affinity ${head.affinitySeconds}s)` : ''}`);
  }
  for (const [id, b] of m.be) if (!used.has(id)) lines.push(`unused backend ${hostPort(decodeBackend(b).addr, decodeBackend(b).port)}`);
  return lines.sort();
}

/** What the IPVS companion table does per client class at each destination (the plan of the ENLS). */
function ipvsDestinations(services: Service[], node: NodeInfo | undefined): string[] {
  let mark = 0x10000;
  const marks = new Map<string, number>();
  const localAddrs = node?.addresses ?? [];
  const markFor = (id: string) => marks.get(id) ?? (marks.set(id, ++mark), mark);
  const ports: Record<IpFamily, string[]> = { ip: nodePortAddrs(node, 'ip', localAddrs), ip6: nodePortAddrs(node, 'ip6', localAddrs) };
  const ctx = { node, localAddrs, markFor, nodePortAddrs: ports };
  const dests: string[] = [];
  for (const svc of services) {
    for (const d of planIpvs(svc, ctx).dests) {
      const classes = CLASSES.map((c) => `${c}=${actionName(d.actions[c])}`).join(' ');
      const allowed = d.allowed ? ` allowed ${d.allowed.join(',')}` : '';
      dests.push(`${d.proto} ${hostPort(d.addr, d.port)}${d.bind ? ' (kube-ipvs0)' : ''}: ${classes}${allowed}`);
    }
  }
  return dests.sort();
}

/**
 * A table as nft text, one block per set (its elements sorted) and per chain (its rules in order),
 * blocks sorted by name. Each block is one string, so that two tables compare block by block.
 */
export function tableBlocks(fam: NftFam, t: FakeTable): Map<string, string> {
  const line = (op: Op) => toNftText(fam, 'kpng', [op]).trimEnd().replace(`${fam} kpng `, '').replace(/^add (chain|set|map) /, '$1 ');
  const out = new Map<string, string>();
  for (const [name, s] of t.sets) {
    const elem = (e: Elem) => line({ kind: 'addElems', set: name, elems: [e] }).replace(/^add element \S+ \{ (.*) \}$/, '$1');
    const elems = [...s.elems.values()].map((e) => `  ${elem(e)}`).sort();
    out.set(`set ${name}`, [line({ kind: 'addSet', set: s.spec }), ...elems].join('\n'));
  }
  for (const [name, c] of t.chains) {
    const rules = c.rules.map((r) => `  ${line({ kind: 'addRule', chain: name, stmt: r }).replace(/^add rule \S+ /, '')}`);
    out.set(`chain ${name}`, [line({ kind: 'addChain', chain: c.spec }), ...rules].join('\n'));
  }
  return new Map([...out].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
}

/** The blocks of `t` that differ from `base`'s (blocks of the base that `t` lacks show as removed). */
function blocksBeyond(fam: NftFam, t: FakeTable, base: FakeTable): string[] {
  const have = tableBlocks(fam, t), b = tableBlocks(fam, base);
  const out: string[] = [];
  for (const [k, text] of have) if (b.get(k) !== text) out.push(text);
  for (const k of b.keys()) if (!have.has(k)) out.push(`(removed) ${k}`);
  return out;
}

const orNone = (lines: string[]) => (lines.length ? lines.join('\n') : '(none)');

/**
 * One step as the golden file shows it. `prevBase`: the previous step's base tables as text (shown
 * again only when they change: the base depends on the node alone).
 */
export function renderStep(n: number, st: Step, r: StepResult, prevBase: string | undefined): { text: string; base: string } {
  const baseOf = (fam: NftFam) => [...tableBlocks(fam, r.nftBase[fam]).values()].join('\n');
  const base = FAMS.map(baseOf).join('\n');
  const out = [
    `## step ${n}: ${st.about.trim().replace(/\n/g, ' ')}`,
    '',
    `### sync: ${(['nft', 'ebpf', 'ipvs'] as const).map((b) => `${b} ${r.sync[b]}`).join(', ')}`,
    '',
    '### warnings',
    orNone(r.warnings),
    '',
    '### enls',
    r.enls,
    '',
    '### conntrack entries deleted (stale UDP)',
    orNone(r.conntrack),
  ];
  for (const fam of FAMS) {
    if (base !== prevBase) out.push('', `### nft ${fam}: the table with no service (this node's base)`, baseOf(fam));
    out.push('', `### nft ${fam}: what the services add to the base`, orNone(blocksBeyond(fam, r.nft[fam], r.nftBase[fam])));
  }
  if (r.affinity.length) out.push('', '### nft affinity sets: clients kept across the step', orNone(r.affinity));
  out.push(
    '',
    '### ebpf socket LB (connect() of this node\'s processes)',
    orNone(r.ebpf),
    '',
    '### ipvs: companion table per client class',
    orNone(r.ipvsDests),
    '',
    '### ipvs: virtual servers and kube-ipvs0 addresses (w0: draining)',
    orNone(r.ipvsKernel),
    '',
  );
  return { text: out.join('\n'), base };
}

/**
 * Runs every step; returns the golden text and each step's result. `check` is called after each step
 * (numbered from 1) with the objects the cluster then holds.
 */
export async function runScenario(s: Scenario, check?: (step: number, r: StepResult, live: Obj[]) => Promise<void>,
  lose?: ConstructorParameters<typeof ScenarioRun>[1]): Promise<{ text: string; results: StepResult[] }> {
  const run = new ScenarioRun(s, lose);
  const parts = [
    `# ${s.about.trim().replace(/\n/g, '\n# ')}`,
    '# Made by test/scenarios.test.ts; KPNG_UPDATE_GOLDEN=1 rewrites it (review the diff).',
    '',
  ];
  const results: StepResult[] = [];
  let base: string | undefined;
  try {
    for (let i = 0; i < s.steps.length; i++) {
      const r = await run.next();
      const shown = renderStep(i + 1, s.steps[i]!, r, base);
      base = shown.base;
      parts.push(shown.text);
      results.push(r);
      await check?.(i + 1, r, [...run.live.values()]);
    }
  } finally {
    run.close();
  }
  return { text: parts.join('\n'), results };
}

// ---------------------------------------------------------------------------------------------
// Full renders of an ENLS, to compare with what the incremental path left.

/** The nft tables of a full sync of these services, slot numbers aside (tableContent). */
export function nftFullContent(services: Service[], node: NodeInfo | undefined) {
  const keyed = services.map((svc): [string, Service] => [`svc/${svc.namespace}/${svc.name}`, svc]);
  const full = renderFull(keyed, node);
  return { ip: tableContent(full.tables.ip), ip6: tableContent(full.tables.ip6) };
}

/** The socket-LB maps a fresh dataplane writes for these services (one full sync into empty maps). */
export async function ebpfFull(services: Service[], node: NodeInfo | undefined): Promise<string[]> {
  const fake = new FakeEbpfMaps();
  await new EbpfDataplane(async () => fake, quiet).fullSync(services, node, 1);
  return socketLB(fake);
}

/**
 * The socket-LB plan of these services (planService with fresh ids, no dataplane), as socketLB()
 * shows the maps.
 */
export function socketLBPlan(services: Service[], node: NodeInfo | undefined): string[] {
  const m = new FakeEbpfMaps();
  let nextBackend = 1, nextService = 1;
  const serviceIds = new Map<string, number>();
  const ids: Ids = {
    backend: () => nextBackend++,
    service: (keys) => { const k = keys.head(); return serviceIds.get(k) ?? (serviceIds.set(k, nextService), nextService++); },
  };
  for (const svc of services) {
    const p = planEntries(planSocketLB(svc, ids, node));
    const entries: Array<[string, string]> = [...p.heads, ...[...p.slots].map(([sk, id]): [string, string] => [sk, slotValue(id)])];
    for (const [k, v] of entries) m.svc.set(Buffer.from(k, 'latin1').toString('hex'), Buffer.from(v, 'latin1'));
    for (const [id, v] of p.backends) m.be.set(id, Buffer.from(v, 'latin1'));
  }
  return socketLB(m);
}

/** A slot's value in the service map: its backend id (little-endian), the rest zero. */
function slotValue(id: number): string {
  const b = Buffer.alloc(20);
  b.writeUInt32LE(id, 0);
  return b.toString('latin1');
}

/** Lines of socketLB() with each address's backends sorted: slot order is the dataplane's choice. */
export const anySlotOrder = (lines: string[]): string[] =>
  lines.map((l) => l.replace(/ -> ([^(]*?)( \(affinity \d+s\))?$/, (_, list: string, affinity = '') =>
    ` -> ${list.split(', ').sort().join(', ')}${affinity}`));

/** The IPVS kernel a fresh dataplane makes for these services. */
export async function ipvsFull(services: Service[], node: NodeInfo | undefined): Promise<string[]> {
  const fake = new FakeIpvsKernel(node?.addresses ?? []);
  await ipvsDataplane(fake).fullSync(services, node);
  return fake.text();
}

/** The ENLS of a fresh model fed with these objects at once (revision aside). */
export function freshEnls(s: Scenario, objects: Obj[]): Item[] {
  return [...cluster(s.node, objects, { model: modelOptions(s.model ?? {}) }).state.items()];
}

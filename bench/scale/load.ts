// Runs a load plan against a cluster: each phase's operations at their moments (seconds from the
// phase's start), at most `concurrency` requests in flight, then waits until the cluster has settled
// (every Deployment at its size with every pod ready, no pod of the load left terminating, and every
// Service's EndpointSlices holding exactly its Deployment's ready pods).
import { deploymentObject, LOAD_LABEL, namespaceObject, serviceObject, templateAnnotation } from './objects';
import { replicasAfter, type LoadPlan, type Operation, type Phase } from './load-plan';
import type { Kube } from './kube';

export interface PhaseRun {
  name: string;
  /** Date.now() at the phase's first operation, its last answer, and when the cluster had settled. */
  startedAt: number;
  opsDoneAt: number;
  settledAt: number;
  operations: number;
  /** Operations that failed after retries (the bench reports them; none is expected). */
  failures: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function createNamespaces(kube: Kube, plan: LoadPlan): Promise<void> {
  for (const ns of plan.namespaces) {
    await kube.must('POST', '/api/v1/namespaces', namespaceObject(ns), [409]);
    // Pods need the namespace's default ServiceAccount, which the controller-manager makes.
    for (let i = 0; (await kube.request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status !== 200; i++) {
      if (i > 600) throw new Error(`namespace ${ns}: no default ServiceAccount after 60 s (is kube-controller-manager running?)`);
      await sleep(100);
    }
  }
}

async function runOp(kube: Kube, o: Operation): Promise<void> {
  switch (o.op) {
    case 'create-service':
      await kube.must('POST', `/api/v1/namespaces/${o.service.namespace}/services`, serviceObject(o.service), [409]);
      return;
    case 'create-deployment':
      await kube.must('POST', `/apis/apps/v1/namespaces/${o.deployment.namespace}/deployments`, deploymentObject(o.deployment), [409]);
      return;
    case 'scale':
      await kube.must('PATCH', `/apis/apps/v1/namespaces/${o.deployment.namespace}/deployments/${o.deployment.name}`, { spec: { replicas: o.replicas } });
      return;
    case 'update':
      await kube.must('PATCH', `/apis/apps/v1/namespaces/${o.deployment.namespace}/deployments/${o.deployment.name}`,
        { spec: { template: { metadata: { annotations: templateAnnotation(o.revision) } } } });
      return;
    case 'delete-deployment':
      await kube.must('DELETE', `/apis/apps/v1/namespaces/${o.deployment.namespace}/deployments/${o.deployment.name}`, { propagationPolicy: 'Background' }, [404]);
      return;
    case 'delete-service':
      await kube.must('DELETE', `/api/v1/namespaces/${o.service.namespace}/services/${o.service.name}`, undefined, [404]);
      return;
  }
}

const opName = (o: Operation): string => {
  switch (o.op) {
    case 'create-service': case 'delete-service': return `${o.op} ${o.service.namespace}/${o.service.name}`;
    default: return `${o.op} ${o.deployment.namespace}/${o.deployment.name}`;
  }
};

/** Runs a phase's operations on time; resolves when every one has been answered. */
export async function runOperations(kube: Kube, phase: Phase, concurrency = 16, log: (m: string) => void = () => {}): Promise<{ failures: string[] }> {
  const t0 = performance.now();
  const failures: string[] = [];
  let inFlight = 0;
  let done = 0;
  const waiters: (() => void)[] = [];
  const release = () => { inFlight--; done++; waiters.shift()?.(); };
  let lastLog = t0;
  const running: Promise<void>[] = [];
  for (const o of phase.ops) {
    const wait = t0 + o.at * 1000 - performance.now();
    if (wait > 0) await sleep(wait);
    while (inFlight >= concurrency) await new Promise<void>((r) => waiters.push(r));
    inFlight++;
    running.push(runOp(kube, o).catch((e) => { failures.push(`${opName(o)}: ${(e as Error).message}`); }).finally(release));
    if (performance.now() - lastLog > 30_000) {
      lastLog = performance.now();
      log(`${phase.name}: ${done}/${phase.ops.length} operations after ${((lastLog - t0) / 1000).toFixed(0)} s`);
    }
  }
  await Promise.all(running);
  return { failures };
}

export interface Settled { ok: boolean; waiting: string[] }

/** Is the cluster where the plan says it should be after `phase`? Lists what is still moving. */
export async function settledAfter(kube: Kube, plan: LoadPlan, phase: Phase['name']): Promise<Settled> {
  const want = replicasAfter(plan, phase);
  const waiting: string[] = [];
  const sel = `labelSelector=${encodeURIComponent(`group=${LOAD_LABEL.group}`)}`;
  const deps = new Map<string, any>();
  const pods: any[] = [];
  for (const ns of plan.namespaces) {
    for (const d of (await kube.list(`/apis/apps/v1/namespaces/${ns}/deployments`, sel)).items) deps.set(`${ns}/${d.metadata.name}`, d);
    pods.push(...(await kube.list(`/api/v1/namespaces/${ns}/pods`, sel)).items);
  }
  for (const [key, n] of want) {
    const d = deps.get(key);
    const st = d?.status ?? {};
    if (!d) waiting.push(`${key}: not created`);
    else if ((st.observedGeneration ?? 0) < d.metadata.generation || st.updatedReplicas !== n || st.readyReplicas !== n || st.replicas !== n) {
      waiting.push(`${key}: ${st.readyReplicas ?? 0}/${n} ready, ${st.updatedReplicas ?? 0} updated, ${st.replicas ?? 0} in all`);
    }
  }
  for (const key of deps.keys()) if (!want.has(key)) waiting.push(`${key}: still present`);
  const expectedPods = [...want.values()].reduce((a, b) => a + b, 0);
  if (pods.length !== expectedPods) waiting.push(`${pods.length} pods of the load exist, ${expectedPods} expected`);
  // The Services' slices: every Service of the plan present after create/scale/update with exactly its
  // Deployment's ready pods; none left after delete.
  const podsOf = new Map<string, number>();
  for (const p of pods) {
    const svc = p.metadata.labels?.svc;
    const ready = p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True') && !p.metadata.deletionTimestamp;
    if (svc && ready && p.status?.podIP) podsOf.set(`${p.metadata.namespace}/${svc}`, (podsOf.get(`${p.metadata.namespace}/${svc}`) ?? 0) + 1);
  }
  const readyInSlices = new Map<string, number>();
  for (const ns of plan.namespaces) {
    for (const s of (await kube.list(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`)).items) {
      const svc = s.metadata.labels?.['kubernetes.io/service-name'];
      const n = (s.endpoints ?? []).filter((e: any) => e.conditions?.ready !== false).length;
      if (svc) readyInSlices.set(`${ns}/${svc}`, (readyInSlices.get(`${ns}/${svc}`) ?? 0) + n);
    }
  }
  const services = phase === 'delete' ? [] : plan.services.map((s) => `${s.namespace}/${s.name}`);
  for (const key of services) {
    const want = podsOf.get(key) ?? 0;
    if ((readyInSlices.get(key) ?? 0) !== want) waiting.push(`${key}: ${readyInSlices.get(key) ?? 0} ready endpoints in its slices, ${want} ready pods`);
  }
  if (phase === 'delete') for (const [key, n] of readyInSlices) if (n) waiting.push(`${key}: ${n} endpoints left`);
  return { ok: waiting.length === 0, waiting };
}

/** Polls settledAfter() until it holds; throws with what is still moving after `timeoutMs`. */
export async function waitSettled(kube: Kube, plan: LoadPlan, phase: Phase['name'], timeoutMs: number, log: (m: string) => void = () => {}): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last: Settled = { ok: false, waiting: [] };
  let lastLog = Date.now();
  while (Date.now() < end) {
    last = await settledAfter(kube, plan, phase);
    if (last.ok) return;
    if (Date.now() - lastLog > 30_000) {
      lastLog = Date.now();
      log(`${phase}: waiting for ${last.waiting.length} thing(s), e.g. ${last.waiting.slice(0, 3).join('; ')}`);
    }
    await sleep(2000);
  }
  throw new Error(`${phase}: the cluster did not settle within ${timeoutMs / 1000} s: ${last.waiting.slice(0, 10).join('; ')}${last.waiting.length > 10 ? ` (+${last.waiting.length - 10} more)` : ''}`);
}

/** Removes every namespace of the load (and waits until they are gone). */
export async function removeLoad(kube: Kube, plan: LoadPlan, timeoutMs = 600_000): Promise<void> {
  for (const ns of plan.namespaces) await kube.must('DELETE', `/api/v1/namespaces/${ns}`, undefined, [404]);
  const end = Date.now() + timeoutMs;
  for (const ns of plan.namespaces) {
    while ((await kube.request('GET', `/api/v1/namespaces/${ns}`)).status !== 404) {
      if (Date.now() > end) throw new Error(`namespace ${ns} still exists after ${timeoutMs / 1000} s`);
      await sleep(1000);
    }
  }
}

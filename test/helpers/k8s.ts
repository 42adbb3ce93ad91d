// Builders of raw Kubernetes objects for tests (test/shared/objects.ts, shared with the benches), and a
// store fed with them.
import { ClusterStore } from '../../src/store/cluster';
import { NodeState } from '../../src/store/node-state';
import { routeRows, type RouteRow } from '../../src/sink/routes';
import { createLogger, type Logger } from '../../src/util/log';
import { severityAndMessage } from './klog';
import type { ModelOptions } from '../../src/model/options';

export { ep, node, slice, svc, type EpOpts, type Obj, type SvcOpts } from '../shared/objects';
import type { Obj } from '../shared/objects';

/** A store + node state for `nodeName`, fed with objects, plus the warnings said. */
export function cluster(nodeName = 'n1', objects: Obj[] = [], opts: { serviceProxyName?: string; model?: ModelOptions } = {}) {
  const warnings: string[] = [];
  // Each line must be klog's; kept as `warn: message` (the header's time and pid say nothing here).
  const log: Logger = createLogger('warn', (l) => warnings.push(severityAndMessage(l)));
  const store = new ClusterStore({ log, serviceProxyName: opts.serviceProxyName, model: opts.model });
  const state = new NodeState(store, nodeName);
  const add = (...objs: Obj[]) => {
    for (const o of objs) store.apply(o.kind as 'Service', o);
    store.flush();
  };
  const del = (o: Obj) => { store.apply(o.kind as 'Service', o, true); store.flush(); };
  add(...objects);
  store.markSynced();
  return { store, state, warnings, add, del, routes: (): RouteRow[] => routeRows(state.items()) };
}

/** The routes of one service, by port. */
export function routesOf(rows: RouteRow[], service: string): RouteRow[] {
  return rows.filter((r) => r.service === service);
}

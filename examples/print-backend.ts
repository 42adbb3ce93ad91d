// A complete kpng backend that prints what it is asked to program. Copy it to start yours.
//
//   npm run build
//   node dist/examples/print-backend.js --file examples/cluster.yaml --node n1
//   node dist/examples/print-backend.js --api unix:///run/kpng/kpng.sock --node n1 [--full]
//
// In your own project, import from 'kpng' instead of '../src/index'.
import { parseArgs } from 'node:util';
import {
  describeRoutes, protocolName, watchFileState, watchLocalState,
  type Backend, type Batch, type Item, type StateView, type StateWatch,
} from '../src/index';

/**
 * One line per service port and family: for each destination (cluster IP, external IP, load-balancer
 * IP, node port), where packets go per client class (pod / node / other): a list of endpoints (cluster
 * or local), reject or drop, and whether they are masqueraded. The model decided all of it: a backend
 * renders these routes and never looks at traffic policies or topology itself.
 */
function describe(item: Item): string[] {
  if (item.node) return [`node ${item.node.name} (zone ${item.node.zone || '-'}) pods=${[...item.node.podCidrs.v4, ...item.node.podCidrs.v6].join(',') || '-'}`];
  const svc = item.service!;
  const vips = [...svc.clusterIps.v4, ...svc.clusterIps.v6].join(',');
  return svc.ports.map((p) => {
    const dests = [['cluster-ip', p.clusterIp], ['external-ip', p.externalIp], ['lb-ip', p.loadBalancerIp], ['node-port', p.nodePort]] as const;
    const text = dests.filter(([, r]) => r).map(([name, r]) => `${name}: ${describeRoutes(p, r!)}`).join('; ');
    return `${svc.namespace}/${svc.name} ${vips} ${p.port.port}/${protocolName(p.port.protocol)} ${text}`;
  });
}

/** Incremental: program only what changed. A real backend would update kernel state here. */
const incremental: Backend = {
  name: 'print-changes',
  onChange(batch: Batch) {
    if (batch.reset) console.log(`--- full state, revision ${batch.revision} (forget everything you had)`);
    else console.log(`--- revision ${batch.revision}: ${batch.changes.length} change(s)`);
    for (const c of batch.changes) {
      if (c.op === 'delete') console.log(`- ${c.key}`);
      else for (const line of describe(c.item)) console.log(`+ ${line}`);
    }
  },
};

/** Full state: rebuild everything from the current state each time (simplest, fine for small clusters). */
const full: Backend = {
  name: 'print-state',
  onState(state: StateView, batch: Batch) {
    console.log(`--- node ${state.node}, revision ${batch.revision}, ${state.size} items`);
    for (const item of state.items()) for (const line of describe(item)) console.log(`  ${line}`);
  },
};

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      api: { type: 'string' },
      file: { type: 'string' },
      node: { type: 'string' },
      full: { type: 'boolean' },
      once: { type: 'boolean' },
    },
  });
  if (!values.node || (!values.api && !values.file)) {
    console.error('usage: print-backend (--api unix:///run/kpng/kpng.sock | --file cluster.yaml) --node NAME [--full] [--once]');
    process.exit(2);
  }
  const backend = values.full ? full : incremental;
  const common = { node: values.node, once: values.once, minSyncPeriodMs: 250 };
  const watch: StateWatch = values.api
    ? await watchLocalState({ ...common, api: values.api }, backend)
    : await watchFileState({ ...common, file: values.file! }, backend);
  const stop = () => { void watch.stop(); };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await watch.done;
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
}

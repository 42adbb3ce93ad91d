// A third-party backend registered with kpng's backend contract, loaded by the kpng command:
//
//   kpng file --input examples/cluster.yaml --node n1 --plugin ./dist/examples/plugin-backend.js \
//        --to endpoint-count --count-format json --once
//
// It registers under a name (`--to endpoint-count`), with its own flag and help text (it appears in
// `kpng --plugin ... --help`), and a constructor returning a Sink. In your own package, import from
// 'kpng' instead of '../src/index'. A kernel backend would implement a Dataplane and wrap it in
// KernelSink to get full resyncs, the periodic resync, conntrack clean-up and counters for free.
import { registerBackend, routeEndpoints, type Batch, type Sink, type StateView } from '../src/index';

registerBackend({
  name: 'endpoint-count',
  summary: 'example plugin: how many endpoints each service port reaches from a pod of this node',
  flags: [{ name: 'count-format', type: 'string', placeholder: 'text|json', default: 'text', help: 'output format of the endpoint-count example' }],
  create(ctx): Sink {
    const format = ctx.flags['count-format'];
    if (format !== 'text' && format !== 'json') throw new Error(`--count-format ${String(format)}: expected text or json`);
    return {
      name: 'endpoint-count',
      async apply(batch: Batch, state: StateView): Promise<void> {
        const counts: Record<string, number> = {};
        for (const item of state.items()) {
          const svc = item.service;
          if (!svc) continue;
          for (const sp of svc.ports) {
            const key = `${svc.namespace}/${svc.name}:${sp.port.port}`;
            counts[key] = (counts[key] ?? 0) + routeEndpoints(sp, sp.clusterIp.pod).length;
          }
        }
        if (format === 'json') process.stdout.write(JSON.stringify({ revision: batch.revision, counts }) + '\n');
        else for (const [k, n] of Object.entries(counts)) process.stdout.write(`${k} ${n}\n`);
        ctx.log.info(`endpoint-count: revision ${batch.revision}, ${Object.keys(counts).length} service ports`);
      },
    };
  },
});

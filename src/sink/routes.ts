// The routes view: for each service port, where this node sends internal and external traffic.
// A table for humans, or JSON lines for tools:
//   {"service":"ns/name","protocol":"TCP","port":80,"internal":["10.0.0.1:8080"],"external":[]}
import { hostPort } from '../model/ip';
import { protocolName, Target, type EndpointList, type IPSet, type Item } from '../model/enls';
import { externalRoutesOf, routeEndpoints, targetName } from '../model/views';
import type { Batch, Sink, StateView } from './sink';

export interface RouteRow {
  service: string;
  protocol: 'TCP' | 'UDP' | 'SCTP';
  port: number;
  internal: string[];
  external: string[];
}

/** The VIPs of a row, for the table only. */
interface TableRow extends RouteRow { vips: string[]; nodePort: number; internalText: string; externalText: string; shortCircuit: string }

const ips = (s: IPSet): string[] => [...s.v4, ...s.v6];
const eps = (list: EndpointList): string[] => list.map((e) => hostPort(e.ip, e.port));

/**
 * One row per service port (families merged): `internal` is where cluster-IP traffic goes, `external`
 * where traffic from outside the node to a node port / LB IP / external IP goes (the "other" client
 * class); pods and the node itself may be routed differently (the table's last column, the dump).
 */
function rowsOf(item: Item): TableRow[] {
  const svc = item.service;
  if (!svc) return [];
  const rows = new Map<string, TableRow>();
  for (const p of svc.ports) {
    const key = `${p.port.protocol}/${p.port.port}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        service: `${svc.namespace}/${svc.name}`, protocol: protocolName(p.port.protocol), port: p.port.port,
        internal: [], external: [], vips: [...ips(svc.clusterIps), ...ips(svc.externalIps), ...ips(svc.loadBalancerIps)],
        nodePort: p.port.nodePort, internalText: '', externalText: '', shortCircuit: '',
      };
      rows.set(key, row);
    }
    const ext = externalRoutesOf(p);
    row.internal.push(...eps(routeEndpoints(p, p.clusterIp.other)));
    if (ext) row.external.push(...eps(routeEndpoints(p, ext.other)));
    const join = (a: string, b: string) => (a && a !== b ? `${a} ${b}` : b);
    row.internalText = join(row.internalText, noneText(p.clusterIp.other.target, routeEndpoints(p, p.clusterIp.other)));
    row.externalText = ext ? join(row.externalText, noneText(ext.other.target, routeEndpoints(p, ext.other))) : '-';
    row.shortCircuit = ext && ext.pod.target !== ext.other.target ? `pods,node->${targetName(ext.pod.target)}` : row.shortCircuit;
  }
  return [...rows.values()];
}

function noneText(t: Target, list: EndpointList): string {
  if (list.length) return eps(list).join(',');
  return t === Target.DROP ? '(drop: no local endpoint)' : '(reject: no endpoints)';
}

export function routeRows(items: Iterable<Item>): RouteRow[] {
  const out: RouteRow[] = [];
  for (const item of items) for (const r of rowsOf(item)) out.push({ service: r.service, protocol: r.protocol, port: r.port, internal: r.internal, external: r.external });
  return out;
}

export function formatRoutesJsonl(items: Iterable<Item>): string {
  return routeRows(items).map((r) => JSON.stringify(r) + '\n').join('');
}

export function formatRoutesTable(items: Iterable<Item>): string {
  const rows: TableRow[] = [];
  for (const item of items) rows.push(...rowsOf(item));
  const cells = rows.map((r) => [
    r.service,
    `${r.port}/${r.protocol}${r.nodePort ? ` node:${r.nodePort}` : ''}`,
    r.vips.join(','),
    r.internalText,
    r.externalText,
    r.shortCircuit,
  ]);
  const header = ['SERVICE', 'PORT', 'VIPS', 'INTERNAL', 'EXTERNAL', ''];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]) => c.map((x, i) => (i === c.length - 1 ? x : x.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(header), ...cells.map(line)].join('\n') + '\n';
}

export interface RoutesSinkOptions {
  format: 'table' | 'jsonl';
  write: (text: string) => void;
}

/** Prints the whole routes view after every sync (with a revision header in table form). */
export function createRoutesSink(opts: RoutesSinkOptions): Sink {
  return {
    name: 'routes',
    async apply(batch: Batch, state: StateView): Promise<void> {
      if (opts.format === 'jsonl') opts.write(formatRoutesJsonl(state.items()));
      else opts.write(`# node ${state.node}, revision ${batch.revision}\n${formatRoutesTable(state.items())}`);
    },
  };
}

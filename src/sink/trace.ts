// The trace sink prints every Set, Delete and Sync as it happens: the smallest possible
// backend, and a way to watch what a real backend is asked to do.
import { describeRoutes } from '../model/views';
import { protocolName, type Item } from '../model/enls';
import type { Batch, Sink } from './sink';

export function describeItem(item: Item): string {
  if (item.node) return `node ${item.node.name} zone=${item.node.zone || '-'} addresses=${item.node.addresses.join(',') || '-'}`;
  const s = item.service!;
  const ports = s.ports.map((p) => {
    const dests = [['cluster-ip', p.clusterIp], ['external-ip', p.externalIp], ['lb-ip', p.loadBalancerIp], ['node-port', p.nodePort]] as const;
    const text = dests.filter(([, r]) => r).map(([name, r]) => `${name}=${describeRoutes(p, r!)}`).join(' ');
    return `${p.port.port}/${protocolName(p.port.protocol)}${p.family === 2 ? '/v6' : ''} ${text}`;
  });
  return `${s.type} ${ports.join(' ')}`;
}

export function createTraceSink(write: (line: string) => void): Sink {
  return {
    name: 'trace',
    async apply(batch: Batch): Promise<void> {
      if (batch.reset) write(`reset`);
      for (const c of batch.changes) write(c.op === 'set' ? `set ${c.key} ${describeItem(c.item)}` : `delete ${c.key}`);
      write(`sync rev=${batch.revision} changes=${batch.changes.length}`);
    },
  };
}

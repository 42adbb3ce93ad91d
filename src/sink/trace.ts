// The trace sink prints every Set, Delete and Sync as it happens: the smallest possible
// backend, and a way to watch what a real backend is asked to do.
import { hostPort } from '../model/ip';
import { protocolName, type Item } from '../model/enls';
import type { Batch, Sink } from './sink';

export function describeItem(item: Item): string {
  if (item.node) return `node ${item.node.name} zone=${item.node.zone || '-'} addresses=${item.node.addresses.join(',') || '-'}`;
  const s = item.service!;
  const ports = s.ports.map((p) => {
    const list = (l: typeof p.internal) => l.map((e) => hostPort(e.ip, e.port)).join(',') || (p.hasEndpoints ? 'drop' : 'reject');
    return `${p.port.port}/${protocolName(p.port.protocol)} internal=[${list(p.internal)}]${s.external ? ` external=[${list(p.external)}]` : ''}`;
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

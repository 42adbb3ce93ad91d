// The dump view: the ENLS itself (the State message) as JSON or YAML, after every sync.
import { yaml } from '../util/lazy-yaml';
import { pb, wireItem, type Item } from '../model/enls';
import type { Batch, Sink, StateView } from './sink';

export type DumpFormat = 'json' | 'yaml';

/** A plain object of the state: enums as names, every field present (so a reader sees zeros too). */
export function stateObject(node: string, revision: number, items: Iterable<Item>): Record<string, unknown> {
  const state = pb.State.toObject(pb.State.create({ node, revision, items: [...items].map(wireItem) }), { enums: String, longs: Number, defaults: true, oneofs: false });
  // Readers expect the header fields first.
  return { node: state.node, revision: state.revision, items: state.items };
}

export function formatDump(format: DumpFormat, obj: Record<string, unknown>): string {
  return format === 'yaml' ? `---\n${yaml().stringify(obj)}` : JSON.stringify(obj, null, 2) + '\n';
}

export function createDumpSink(opts: { format: DumpFormat; write: (text: string) => void }): Sink {
  return {
    name: 'dump',
    async apply(batch: Batch, state: StateView): Promise<void> {
      opts.write(formatDump(opts.format, stateObject(state.node, batch.revision, state.items())));
    },
  };
}

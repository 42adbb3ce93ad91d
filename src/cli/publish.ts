// `kpng publish` and `kpng aggregator remove|status`: the smallest producer and the admin calls.
//
//   kpng publish --producer NAME --file objects.yaml [--aggregator unix:///run/kpng/aggregator.sock] [--once]
//     publishes the objects document and follows the file's changes (a bad version is reported and
//     the previous objects stay in the kernel); --once: publish, wait for the kernel, exit.
//   kpng aggregator remove PRODUCER [--aggregator URL]   delete a producer's tables and forget it
//   kpng aggregator status [--aggregator URL]            what each producer owns, its last commit
import { promises as fsp, watchFile, unwatchFile } from 'node:fs';
import { parseArgs as nodeParseArgs } from 'node:util';
import { commandHelp } from './help';
import { COMMON_FLAGS, commandFlags, commandSpec } from './spec';
import { yaml } from '../util/lazy-yaml';
import { aggregatorStatus, DeclareRefused, ProducerClient, removeProducer } from '../aggregator/client';
import { parseObjects } from '../aggregator/objects';

export const DEFAULT_AGGREGATOR = 'unix:///run/kpng/aggregator.sock';

interface Args { positional: string[]; flags: Record<string, string | boolean | undefined> }

/** The command's flags as spec.ts declares them; `--help` prints its help and ends the command (null). */
function parseCommand(name: 'publish' | 'aggregator', argv: string[], write: (s: string) => void): Args | null {
  const spec = commandSpec(name)!;
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const f of [...commandFlags(spec), ...COMMON_FLAGS]) options[f.name] = { type: f.type, ...(f.short ? { short: f.short } : {}) };
  const { values, positionals } = nodeParseArgs({ args: argv, options, allowPositionals: true });
  if (values.help) { write(commandHelp(spec)); return null; }
  if (positionals.length > (spec.positionals ?? 0)) throw new Error(`unexpected argument ${JSON.stringify(positionals[spec.positionals ?? 0])}; usage: ${spec.usage.map((u) => `kpng ${u}`).join(' | ')}`);
  return { positional: positionals, flags: values as Args['flags'] };
}

function describe(e: unknown): string {
  if (e instanceof DeclareRefused) {
    const f = e.result.failures ?? [];
    return e.message + f.map((x) => `\n  ${x.op} ${x.object}: ${x.code}${x.message ? ` (${x.message})` : ''}`).join('');
  }
  return (e as Error).message;
}

async function readDoc(file: string): Promise<unknown> {
  const doc = yaml().parse(await fsp.readFile(file, 'utf8')) as unknown;
  parseObjects(doc); // refuse a bad document here, with its path, before sending it
  return doc;
}

async function publish(argv: string[], write: (s: string) => void, signal?: AbortSignal): Promise<number> {
  const a = parseCommand('publish', argv, write);
  if (!a) return 0;
  const file = (a.flags.file as string | undefined) ?? a.positional[0];
  const name = a.flags.producer as string | undefined;
  if (!file || !name) throw new Error('usage: kpng publish --producer NAME --file objects.yaml [--aggregator URL] [--once]');
  const address = (a.flags.aggregator as string | undefined) ?? DEFAULT_AGGREGATOR;
  let doc = await readDoc(file);
  const p = await ProducerClient.connect(address, name);
  p.onResult((r) => write(r.ok ? `${name}: retry committed (commit ${r.commit})\n` : `${name}: retry refused: ${r.error}\n`));
  const send = async (d: unknown): Promise<boolean> => {
    try {
      const r = await p.declare(d);
      write(`${name}: ${file} is in the kernel (commit ${r.commit}, ${r.ops} ops)\n`);
      return true;
    } catch (e) {
      write(`${name}: ${file} refused: ${describe(e)}\n`);
      return false;
    }
  };
  const ok = await send(doc);
  if (a.flags.once) { p.close(); return ok ? 0 : 1; }
  // Follow the file: poll its mtime (works across editors' rename-and-replace).
  let busy = Promise.resolve();
  const onChange = () => {
    busy = busy.then(async () => {
      let next: unknown;
      try {
        next = await readDoc(file);
      } catch (e) {
        write(`${name}: ${file}: ${(e as Error).message}; the previous objects stay\n`);
        return;
      }
      if (JSON.stringify(next) === JSON.stringify(doc)) return;
      doc = next;
      await send(doc);
    });
  };
  watchFile(file, { interval: 200 }, onChange);
  await new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  unwatchFile(file, onChange);
  await busy;
  p.close();
  return 0;
}

/** Runs `kpng publish ...` or `kpng aggregator ...`; returns the exit code. */
export async function runAggregatorCommand(argv: string[], write: (s: string) => void, signal?: AbortSignal): Promise<number> {
  try {
    if (argv[0] === 'publish') return await publish(argv.slice(1), write, signal);
    const a = parseCommand('aggregator', argv.slice(1), write);
    if (!a) return 0;
    const address = (a.flags.aggregator as string | undefined) ?? DEFAULT_AGGREGATOR;
    if (a.positional[0] === 'remove' && a.positional[1]) {
      await removeProducer(address, a.positional[1]);
      write(`removed producer ${a.positional[1]} and its tables\n`);
      return 0;
    }
    if (a.positional[0] === 'status') {
      write(JSON.stringify(await aggregatorStatus(address), null, 2) + '\n');
      return 0;
    }
    throw new Error('usage: kpng aggregator remove PRODUCER | status [--aggregator URL]');
  } catch (e) {
    process.stderr.write(`kpng: ${describe(e)}\n`);
    // A usage error exits 2, as the other commands' do.
    return (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') || /^unexpected argument|^usage:/.test((e as Error).message) ? 2 : 1;
  }
}

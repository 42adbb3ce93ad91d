// `kpng publish` and `kpng aggregator remove|status`: the smallest producer and the admin calls.
//
//   kpng publish --producer NAME --file objects.yaml [--aggregator unix:///run/kpng/aggregator.sock] [--once]
//     publishes the objects document and follows the file's changes (a bad version is reported and
//     the previous objects stay in the kernel); --once: publish, wait for the kernel, exit.
//   kpng aggregator remove PRODUCER [--aggregator URL]   delete a producer's tables and forget it
//   kpng aggregator status [--aggregator URL]            what each producer owns, its last commit
import { promises as fsp, watchFile, unwatchFile } from 'node:fs';
import { yaml } from '../util/lazy-yaml';
import { aggregatorStatus, DeclareRefused, ProducerClient, removeProducer } from './client';
import { parseObjects } from './objects';

export const DEFAULT_AGGREGATOR = 'unix:///run/kpng/aggregator.sock';

interface Args { positional: string[]; flags: Record<string, string | boolean> }

function parseArgs(argv: string[], known: string[], booleans: string[]): Args {
  const out: Args = { positional: [], flags: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) { out.positional.push(a); continue; }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2);
    if (!known.includes(name)) throw new Error(`unknown flag --${name}`);
    if (booleans.includes(name)) { out.flags[name] = true; continue; }
    const v = inline ?? argv[++i];
    if (v === undefined) throw new Error(`--${name} needs a value`);
    out.flags[name] = v;
  }
  return out;
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
  const a = parseArgs(argv, ['producer', 'file', 'aggregator', 'once'], ['once']);
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
    const a = parseArgs(argv.slice(1), ['aggregator'], []);
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
    return 1;
  }
}

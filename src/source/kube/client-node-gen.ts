// Stand-in for @kubernetes/client-node's dist/gen/index.js as its config.js imports it (see
// client-node.ts): the two names config.js uses, loading the real generated API on first call.
import * as path from 'node:path';
import { clientNodeDist } from './client-node';

type Gen = { createConfiguration(...args: unknown[]): unknown; ServerConfiguration: new (...args: unknown[]) => unknown };
let gen: Gen | undefined;

function real(): Gen {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (gen ??= require(path.join(clientNodeDist(), 'gen', 'index.js')) as Gen);
}

export function createConfiguration(...args: unknown[]): unknown {
  return real().createConfiguration(...args);
}

/** Called with `new` by config.js; returning an object from a constructor makes it the result. */
export function ServerConfiguration(...args: unknown[]): unknown {
  return new (real().ServerConfiguration)(...args);
}

// Stand-in for undici as @kubernetes/client-node's config.js imports it (see client-node.ts): the
// two classes it uses (fetch dispatchers, which kpng's transport never asks for), loading undici on
// first construction.
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { clientNodeDist } from './client-node';

type Undici = { Agent: new (...args: unknown[]) => unknown; ProxyAgent: new (...args: unknown[]) => unknown };
let undici: Undici | undefined;

// The undici that client-node itself resolves (its own copy if it has one), required from a sibling
// of config.js: from config.js itself the resolve hook would hand back this module.
const real = (): Undici => (undici ??= createRequire(path.join(clientNodeDist(), 'index.js'))('undici') as Undici);

export function Agent(...args: unknown[]): unknown {
  return new (real().Agent)(...args);
}

export function ProxyAgent(...args: unknown[]): unknown {
  return new (real().ProxyAgent)(...args);
}

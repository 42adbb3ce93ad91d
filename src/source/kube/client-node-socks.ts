// Stand-ins for socks and socks-proxy-agent as @kubernetes/client-node's config.js imports them (see
// client-node.ts): they serve only clusters with a socks:// proxy-url and are loaded on first use.
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { clientNodeDist } from './client-node';

// Resolved from a sibling of config.js, as config.js itself would (its own copies if it has them).
const load = <T>(name: string): T => createRequire(path.join(clientNodeDist(), 'index.js'))(name) as T;

type Socks = { SocksClient: { createConnection(...args: unknown[]): unknown } };
type SocksAgent = { SocksProxyAgent: new (...args: unknown[]) => unknown };

export const SocksClient = {
  createConnection(...args: unknown[]): unknown {
    return load<Socks>('socks').SocksClient.createConnection(...args);
  },
};

/** Called with `new` by config.js; returning an object from a constructor makes it the result. */
export function SocksProxyAgent(...args: unknown[]): unknown {
  return new (load<SocksAgent>('socks-proxy-agent').SocksProxyAgent)(...args);
}

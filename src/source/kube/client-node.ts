// @kubernetes/client-node's KubeConfig (kubeconfig files, in-cluster config, CA/cert/token, exec and
// OIDC plugins, proxies) without loading what kpng never calls. Its config.js imports the generated
// API (dist/gen/index.js: every model and API class, tens of MiB and a large part of start-up) only for
// makeApiClient(), and undici only for fetch dispatchers; kpng uses neither (its transport is
// node:https with applyToHTTPSOptions). The OIDC authenticator (openid-client, jose) and the socks
// proxy modules serve only kubeconfigs that ask for them. A module resolve hook hands config.js
// stand-ins for those imports that load the real modules on first use, so a plugin that does call
// makeApiClient(), or a kubeconfig with an OIDC user, still gets the real thing. Without module.registerHooks (Node < 22.15) the whole package loads.
import * as nodeModule from 'node:module';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { builtinStandIn, builtinStandInSource } from './esm-builtins';

/** config.js's import specifier -> the stand-in module next to this file. */
const STAND_INS: Record<string, string> = {
  './gen/index.js': 'client-node-gen.js',
  undici: 'client-node-undici.js',
  './oidc_auth.js': 'client-node-oidc.js',
  socks: 'client-node-socks.js',
  'socks-proxy-agent': 'client-node-socks.js',
};

let kubeConfig: typeof KubeConfig | undefined;

/** Where the package's dist/ is (it has no "exports" map, so deep paths resolve). */
export function clientNodeDist(): string {
  return path.join(path.dirname(require.resolve('@kubernetes/client-node/package.json')), 'dist');
}

/** The KubeConfig class, loaded once, with the generated API and undici deferred. */
export function kubeConfigClass(): typeof KubeConfig {
  if (kubeConfig) return kubeConfig;
  const configJs = path.join(clientNodeDist(), 'config.js');
  const registerHooks = (nodeModule as { registerHooks?: typeof nodeModule.registerHooks }).registerHooks;
  if (typeof registerHooks !== 'function') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    kubeConfig = (require('@kubernetes/client-node') as typeof import('@kubernetes/client-node')).KubeConfig;
    return kubeConfig;
  }
  const parent = pathToFileURL(configJs).href;
  const standIns = new Map(Object.entries(STAND_INS).map(([spec, file]) => [spec, pathToFileURL(path.join(__dirname, file)).href]));
  // Builtins imported by client-node and the packages beside it (see esm-builtins.ts).
  const modules = pathToFileURL(path.resolve(clientNodeDist(), '..', '..', '..')).href + '/';
  registerHooks({
    resolve(specifier, context, next) {
      const url = (context.parentURL === parent ? standIns.get(specifier) : undefined) ?? builtinStandIn(specifier, context.parentURL, modules);
      return url ? { url, format: 'commonjs', shortCircuit: true } : next(specifier, context);
    },
    load(url, context, next) {
      const source = builtinStandInSource(url);
      return source !== undefined ? { format: 'commonjs', source, shortCircuit: true } : next(url, context);
    },
  });
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  kubeConfig = (require(configJs) as { KubeConfig: typeof KubeConfig }).KubeConfig;
  return kubeConfig;
}

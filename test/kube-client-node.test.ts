// The kube source loads @kubernetes/client-node's KubeConfig without its generated API, undici, the
// OIDC authenticator and the socks proxy modules (src/source/kube/client-node.ts), and each still
// loads when something asks for it. Runs the
// built module (dist/) in a child Node process: jest's own module loader would bypass the resolve hook.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const root = path.join(__dirname, '..');
const built = path.join(root, 'dist', 'src', 'source', 'kube', 'client-node.js');
const pinnedNode = path.join(root, 'node_modules', '.bin', 'node');

// Prints one JSON line: which modules were resolved after each step.
const script = `
const m = require('node:module');
const urls = [];
m.registerHooks({ resolve(s, c, n) { const r = n(s, c); urls.push(r.url); return r; } });
const gen = () => urls.some((u) => u.endsWith('/client-node/dist/gen/index.js'));
const undici = () => urls.some((u) => /\\/undici\\/index\\.js$/.test(u));
const oidc = () => urls.some((u) => u.endsWith('/client-node/dist/oidc_auth.js'));
const socks = () => urls.some((u) => /\\/node_modules\\/socks(-proxy-agent)?\\//.test(u));
const KubeConfig = require(process.argv[1]).kubeConfigClass();
const kc = new KubeConfig();
kc.loadFromFile(process.argv[2]);
// Builtins Node loads only for an ESM facade of http/https/tls (see esm-builtins.ts).
const facadeOnly = ['http2', 'worker_threads', 'internal/deps/undici/undici', 'internal/repl/history'].filter((b) => process.moduleLoadList.includes('NativeModule ' + b));
const out = { server: kc.getCurrentCluster().server, facadeOnly, afterLoad: { gen: gen(), undici: undici(), oidc: oidc(), socks: socks() } };
const opts = {};
kc.applyToHTTPSOptions(opts).then(async () => {
  out.token = opts.headers && opts.headers.Authorization;
  out.afterApply = { gen: gen(), undici: undici(), oidc: oidc(), socks: socks() };
  kc.setCurrentContext('oidc');
  const oidcOpts = {};
  await kc.applyToHTTPSOptions(oidcOpts);
  out.oidcToken = oidcOpts.headers && oidcOpts.headers.Authorization;
  out.afterOidc = { oidc: oidc() };
  kc.setCurrentContext('x');
  out.socksAgent = kc.createAgent({ name: 'via-socks', server: 'https://x', skipTLSVerify: true, proxyUrl: 'socks5://127.0.0.1:1080' }, {}).constructor.name;
  out.afterSocks = { socks: socks() };
  const client = kc.makeApiClient(class { constructor(c) { this.c = c; } });
  out.baseServer = client.c.baseServer.makeRequestContext('/api/v1/services', 'GET').getUrl();
  out.afterApiClient = { gen: gen() };
  const d = kc.createDispatcher({ name: 'c', server: 'https://x', skipTLSVerify: true, proxyUrl: 'http://127.0.0.1:3128' }, {});
  out.dispatcher = d.constructor.name;
  out.afterDispatcher = { undici: undici() };
  console.log(JSON.stringify(out));
});
`;

describe('client-node loaded for config and auth only', () => {
  it('defers the generated API, undici, OIDC and socks until used, then loads the real ones', () => {
    // An unsigned ID token that expires in 2100: the real authenticator reads its expiry and uses it.
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const idToken = `${b64({ alg: 'none' })}.${b64({ sub: 'kpng', exp: 4102444800 })}.`;
    if (!fs.existsSync(built)) throw new Error(`${built} is missing: run \`npm run build\` first`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-kc-'));
    try {
      const kubeconfig = path.join(dir, 'kubeconfig');
      fs.writeFileSync(kubeconfig, JSON.stringify({
        apiVersion: 'v1', kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:6443', 'insecure-skip-tls-verify': true } }],
        users: [
          { name: 'u', user: { token: 'secret-token' } },
          { name: 'o', user: { 'auth-provider': { name: 'oidc', config: { 'id-token': idToken, 'client-id': 'kpng' } } } },
        ],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }, { name: 'oidc', context: { cluster: 'c', user: 'o' } }],
        'current-context': 'x',
      }));
      const node = fs.existsSync(pinnedNode) ? pinnedNode : process.execPath;
      const r = spawnSync(node, ['-e', script, built, kubeconfig], { encoding: 'utf8' });
      expect(r.stderr).toBe('');
      const out = JSON.parse(r.stdout.trim());
      expect(out.server).toBe('https://127.0.0.1:6443');
      expect(out.facadeOnly).toEqual([]);
      expect(out.token).toBe('Bearer secret-token');
      expect(out.afterLoad).toEqual({ gen: false, undici: false, oidc: false, socks: false });
      expect(out.afterApply).toEqual({ gen: false, undici: false, oidc: false, socks: false });
      expect(out.oidcToken).toBe(`Bearer ${idToken}`);
      expect(out.afterOidc).toEqual({ oidc: true });
      expect(out.socksAgent).toBe('SocksProxyAgent');
      expect(out.afterSocks).toEqual({ socks: true });
      expect(out.baseServer).toBe('https://127.0.0.1:6443/api/v1/services');
      expect(out.afterApiClient).toEqual({ gen: true });
      expect(out.dispatcher).toBe('ProxyAgent');
      expect(out.afterDispatcher).toEqual({ undici: true });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

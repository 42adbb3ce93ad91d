// A real Kubernetes control plane (etcd + kube-apiserver) on loopback for e2e tests, the way envtest does
// it for Go controllers. The binaries come from hack/controlplane/build.sh (`make controlplane`).
//
//   const cp = await startControlPlane();
//   afterAll(() => cp.stop());
//   await cp.request('POST', '/api/v1/namespaces/default/services', svc);
//
// Each control plane lives in a fresh temp dir (etcd data, certificates, keys, logs, kubeconfig) and
// listens on free 127.0.0.1 ports. Clients authenticate with a static bearer token whose user is in
// system:masters; authorization is RBAC. kube-apiserver self-signs its serving certificate into its
// --cert-dir; the CA is read back from there. A watchdog process kills the servers and removes the dir
// if this Node process dies without calling stop(), so a failed or killed test leaves nothing behind.

import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import * as https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

export interface ControlPlaneOptions {
  /** Directory holding `etcd` and `kube-apiserver`. Default: $KPNG_CONTROLPLANE_DIR, else
   *  `hack/controlplane/build.sh --print-dir`. */
  binDir?: string;
  /** --service-cluster-ip-range. Default '10.96.0.0/16,fd00:10:96::/112' (dual-stack; Services without
   *  ipFamilyPolicy still get a single IPv4 ClusterIP). */
  serviceClusterIPRange?: string;
  /** --watch-cache. Default true, as in a real cluster: watches (and most lists) are then served from the
   *  apiserver's cache, which answers 410 Gone only for resourceVersions older than its own window (e.g.
   *  from before an apiserver restart) and does not notice an etcd compaction. With false every watch and
   *  list goes to etcd, so after compactEtcd() any older resourceVersion answers 410 Gone at once. */
  watchCache?: boolean;
  /**
   * Keep connections to the API server open between requests (default false: a test that restarts
   * the API server gets no stale sockets). Benchmarks that create tens of thousands of objects set it:
   * a TLS handshake per request is most of a create's cost.
   */
  keepAlive?: boolean;
  /** Extra kube-apiserver flags, appended after the defaults (a later `--flag=value` wins). */
  apiServerArgs?: string[];
  /** Extra etcd flags, appended after the defaults. */
  etcdArgs?: string[];
  /** How long to wait for etcd and for kube-apiserver /readyz. Default 60 s each. */
  startTimeoutMs?: number;
  /** Keep the temp dir (logs, etcd data) after stop(). Also set by KPNG_KEEP_CONTROLPLANE=1. */
  keepDir?: boolean;
  /** Progress messages (start times). Default: one line on stderr; pass `() => {}` to silence. */
  log?: (msg: string) => void;
}

export interface ApiResponse<T = any> {
  status: number;
  headers: IncomingHttpHeaders;
  /** Raw response body (for a watch: one JSON event per line). */
  text: string;
  /** The body's bytes (a protobuf response). */
  raw: Buffer;
  /** The body parsed as JSON, or undefined when it is not one JSON document. */
  body: T;
}

export interface RequestOptions {
  /** Abort after this long and return what arrived so far (status 0 if no response yet). Default 30 s. */
  timeoutMs?: number;
  /** Content-Type of the body. Default application/json, or application/merge-patch+json for PATCH. */
  contentType?: string;
  headers?: Record<string, string>;
}

export interface ControlPlane {
  /** A kubeconfig (JSON) with server, certificate-authority-data and the token. */
  kubeconfigPath: string;
  /** https://127.0.0.1:<port> */
  server: string;
  token: string;
  /** PEM of the CA that signed kube-apiserver's serving certificate. */
  caPem: string;
  /** http://127.0.0.1:<port> (etcd client URL, also serving etcd's HTTP/JSON gateway under /v3/). */
  etcdEndpoint: string;
  /** The temp dir: etcd/, pki/, etcd.log, kube-apiserver.log, kubeconfig. */
  dir: string;
  /** Stop kube-apiserver and etcd (SIGTERM, then SIGKILL after a bound) and remove the temp dir. Idempotent. */
  stop(): Promise<void>;
  /** Stop only kube-apiserver; etcd and its data stay. */
  stopApiServer(): Promise<void>;
  /** (Re)start kube-apiserver with the same port, certificates and flags; resolves when /readyz is ok. */
  startApiServer(): Promise<void>;
  /** Compact etcd at its current revision (physically), so requests that reach etcd with an older
   *  resourceVersion get 410 Gone (all watches and lists with `watchCache: false`; with the watch cache,
   *  only what the cache does not hold). Returns the compacted revision. */
  compactEtcd(): Promise<number>;
  /** A small HTTPS JSON client with the token and CA. Never throws on an HTTP error status. */
  request<T = any>(method: string, apiPath: string, body?: unknown, opts?: RequestOptions): Promise<ApiResponse<T>>;
}

const live = new Set<{ stopSync(): void }>();
let exitHookInstalled = false;

/** Start etcd and kube-apiserver; resolves once kube-apiserver answers /readyz. */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = opts.log ?? ((msg: string) => process.stderr.write(`[controlplane] ${msg}\n`));
  const binDir = opts.binDir ?? process.env.KPNG_CONTROLPLANE_DIR ?? defaultBinDir();
  const etcdBin = path.join(binDir, 'etcd');
  const apiBin = path.join(binDir, 'kube-apiserver');
  for (const bin of [etcdBin, apiBin]) {
    try {
      fs.accessSync(bin, fs.constants.X_OK);
    } catch {
      throw new Error(`control plane binary ${bin} is missing: run \`make controlplane\` (hack/controlplane/build.sh) first`);
    }
  }
  const timeoutMs = opts.startTimeoutMs ?? 60_000;
  const keepDir = opts.keepDir ?? process.env.KPNG_KEEP_CONTROLPLANE === '1';
  const t0 = performance.now();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-cp-'));
  const [etcdPort, peerPort, apiPort] = await freePorts(3);
  const etcdEndpoint = `http://127.0.0.1:${etcdPort}`;
  const server = `https://127.0.0.1:${apiPort}`;
  const token = randomBytes(24).toString('hex');
  const pki = path.join(dir, 'pki');
  fs.mkdirSync(pki, { mode: 0o700 });

  // Static token: user kpng-admin in system:masters (full access under RBAC).
  const tokenFile = path.join(pki, 'tokens.csv');
  fs.writeFileSync(tokenFile, `${token},kpng-admin,kpng-admin,"system:masters"\n`, { mode: 0o600 });
  // Service-account token signing key (EC P-256: instant to generate, ES256 tokens).
  const sa = generateKeyPairSync('ec', {
    namedCurve: 'prime256v1',
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const saPub = path.join(pki, 'sa.pub');
  const saKey = path.join(pki, 'sa.key');
  fs.writeFileSync(saPub, sa.publicKey);
  fs.writeFileSync(saKey, sa.privateKey, { mode: 0o600 });

  const etcdArgs = [
    '--name=kpng',
    `--data-dir=${path.join(dir, 'etcd')}`,
    `--listen-client-urls=${etcdEndpoint}`,
    `--advertise-client-urls=${etcdEndpoint}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-cluster=kpng=http://127.0.0.1:${peerPort}`,
    '--unsafe-no-fsync', // test data: durability across power loss does not matter, speed does
    '--log-level=warn',
    ...(opts.etcdArgs ?? []),
  ];
  const apiArgs = [
    `--etcd-servers=${etcdEndpoint}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${apiPort}`,
    `--cert-dir=${pki}`,
    `--token-auth-file=${tokenFile}`,
    '--authorization-mode=RBAC',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${saPub}`,
    `--service-account-signing-key-file=${saKey}`,
    `--service-cluster-ip-range=${opts.serviceClusterIPRange ?? '10.96.0.0/16,fd00:10:96::/112'}`,
    '--allow-privileged=true',
    `--watch-cache=${opts.watchCache ?? true}`,
    // No controller-manager runs, so nothing would create the service accounts pods need.
    '--disable-admission-plugins=ServiceAccount',
    // The endpoint reconciler refuses a loopback advertise address: the `kubernetes` Service exists but
    // the apiserver writes no Endpoints/EndpointSlice for it.
    '--endpoint-reconciler-type=none',
    // Tests compact etcd themselves (compactEtcd); no background compaction to race with them.
    '--etcd-compaction-interval=0',
    // Quicker start and less memory; irrelevant to a service proxy.
    '--enable-priority-and-fairness=false',
    '--profiling=false',
    '--logging-format=text',
    '--v=0',
    ...(opts.apiServerArgs ?? []),
  ];

  const watchdog = new Watchdog(keepDir ? undefined : dir);
  let etcd: Proc | undefined;
  let api: Proc | undefined;
  let caPem = '';
  let stopped = false;
  const agent = () => new https.Agent({ ca: caPem, keepAlive: opts.keepAlive ?? false, ...(opts.keepAlive ? { maxSockets: 64 } : {}) });
  let httpsAgent: https.Agent | undefined;

  const handle = {
    stopSync(): void {
      // Last resort at process exit: kill now, no waiting.
      for (const p of [api, etcd]) p?.killSync();
      watchdog.release();
      if (!keepDir) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  live.add(handle);
  installExitHook();

  const startApiServer = async (): Promise<void> => {
    if (stopped) throw new Error('control plane is stopped');
    if (api?.running) return;
    const t = performance.now();
    api = Proc.start('kube-apiserver', apiBin, apiArgs, path.join(dir, 'kube-apiserver.log'), watchdog);
    // kube-apiserver writes a self-signed CA + serving cert into --cert-dir on first start (and reuses
    // them on restart): apiserver.crt holds the serving cert followed by its CA.
    const crtFile = path.join(pki, 'apiserver.crt');
    await waitFor(`kube-apiserver serving certificate in ${pki}`, timeoutMs, api, async () => {
      if (!fs.existsSync(crtFile)) return false;
      const pems = splitPems(fs.readFileSync(crtFile, 'utf8'));
      if (pems.length === 0) return false;
      caPem = pems.find((p) => new X509Certificate(p).ca) ?? pems[pems.length - 1];
      return true;
    });
    httpsAgent?.destroy();
    httpsAgent = agent();
    await waitFor(`kube-apiserver ${server}/readyz`, timeoutMs, api, async () => {
      const r = await doRequest('GET', '/readyz', undefined, { timeoutMs: 5000 }).catch(() => undefined);
      return r?.status === 200;
    });
    log(`kube-apiserver ready at ${server} in ${ms(t)}`);
  };

  const stopApiServer = async (): Promise<void> => {
    if (!api?.running) return;
    const t = performance.now();
    await api.stop(15_000);
    httpsAgent?.destroy();
    log(`kube-apiserver stopped in ${ms(t)}`);
  };

  const doRequest = <T>(method: string, apiPath: string, body?: unknown, ropts: RequestOptions = {}): Promise<ApiResponse<T>> =>
    new Promise((resolve, reject) => {
      if (!httpsAgent) return reject(new Error('kube-apiserver is not started'));
      const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
      const headers: Record<string, string> = { Accept: 'application/json', Authorization: `Bearer ${token}`, ...ropts.headers };
      if (payload !== undefined) {
        headers['Content-Type'] = ropts.contentType ?? (method.toUpperCase() === 'PATCH' ? 'application/merge-patch+json' : 'application/json');
        headers['Content-Length'] = String(Buffer.byteLength(payload));
      }
      const url = new URL(apiPath, server);
      let status = 0;
      let resHeaders: IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      const finish = () => {
        clearTimeout(timer);
        const raw = Buffer.concat(chunks);
        const text = raw.toString('utf8');
        let parsed: any;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status, headers: resHeaders, text, raw, body: parsed });
      };
      const req = https.request(url, { method: method.toUpperCase(), headers, agent: httpsAgent }, (res) => {
        status = res.statusCode ?? 0;
        resHeaders = res.headers;
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', finish);
        res.on('error', finish);
        res.on('aborted', finish);
      });
      const timer = setTimeout(() => {
        if (status === 0) {
          req.destroy();
          reject(new Error(`${method} ${apiPath}: no response within ${ropts.timeoutMs ?? 30_000} ms`));
        } else {
          req.destroy();
          finish();
        }
      }, ropts.timeoutMs ?? 30_000);
      req.on('error', (err) => {
        clearTimeout(timer);
        if (status !== 0) finish();
        else reject(err);
      });
      req.end(payload);
    });

  const compactEtcd = async (): Promise<number> => {
    // etcd's gRPC gateway: int64 fields travel as strings, bytes as base64.
    const range = await etcdPost(etcdEndpoint, '/v3/kv/range', { key: Buffer.from('/').toString('base64') });
    const revision = Number(range.header?.revision);
    if (!Number.isSafeInteger(revision) || revision <= 0) throw new Error(`etcd: no revision in ${JSON.stringify(range)}`);
    try {
      await etcdPost(etcdEndpoint, '/v3/kv/compaction', { revision: String(revision), physical: true });
    } catch (err) {
      if (!/compacted/.test(String(err))) throw err; // already compacted at this revision: fine
    }
    return revision;
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    try {
      await api?.stop(15_000);
      await etcd?.stop(10_000);
    } finally {
      httpsAgent?.destroy();
      watchdog.release();
      live.delete(handle);
      if (!keepDir) fs.rmSync(dir, { recursive: true, force: true });
      else log(`kept ${dir}`);
    }
  };

  try {
    etcd = Proc.start('etcd', etcdBin, etcdArgs, path.join(dir, 'etcd.log'), watchdog);
    await waitFor(`etcd ${etcdEndpoint}/health`, timeoutMs, etcd, async () => {
      const res = await fetch(`${etcdEndpoint}/health`).catch(() => undefined);
      return res?.ok === true && ((await res.json()) as { health?: string }).health === 'true';
    });
    log(`etcd ready at ${etcdEndpoint} in ${ms(t0)}`);
    await startApiServer();
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }

  const kubeconfigPath = path.join(dir, 'kubeconfig');
  fs.writeFileSync(
    kubeconfigPath,
    JSON.stringify(
      {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'kpng-test', cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
        users: [{ name: 'kpng-admin', user: { token } }],
        contexts: [{ name: 'kpng-test', context: { cluster: 'kpng-test', user: 'kpng-admin', namespace: 'default' } }],
        'current-context': 'kpng-test',
      },
      null,
      2,
    ),
    { mode: 0o600 },
  );
  log(`control plane up in ${ms(t0)} (dir ${dir})`);

  return {
    kubeconfigPath,
    server,
    token,
    get caPem() {
      return caPem;
    },
    etcdEndpoint,
    dir,
    stop,
    stopApiServer,
    startApiServer,
    compactEtcd,
    request: doRequest,
  };
}

/** The binaries' directory as build.sh computes it (from the versions pinned in its go.mod files). */
function defaultBinDir(): string {
  let d = __dirname;
  for (;;) {
    const script = path.join(d, 'hack', 'controlplane', 'build.sh');
    if (fs.existsSync(script)) return execFileSync(script, ['--print-dir'], { encoding: 'utf8' }).trim();
    const up = path.dirname(d);
    if (up === d) throw new Error('cannot find hack/controlplane/build.sh above ' + __dirname + '; set KPNG_CONTROLPLANE_DIR');
    d = up;
  }
}

/** n distinct free TCP ports on 127.0.0.1 (held together while choosing, then released). */
async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => resolve());
      });
    }
    return servers.map((s) => (s.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

async function etcdPost(endpoint: string, p: string, body: unknown): Promise<any> {
  const res = await fetch(endpoint + p, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${p}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text);
}

async function waitFor(what: string, timeoutMs: number, proc: Proc, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 25;
  for (;;) {
    if (!proc.running) throw new Error(`${proc.name} exited (${proc.exitInfo}) while waiting for ${what}; log tail:\n${proc.logTail()}`);
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; ${proc.name} log tail:\n${proc.logTail()}`);
    await sleep(delay);
    delay = Math.min(delay * 2, 250);
  }
}

/** One server process in its own process group, its output appended to a log file. */
class Proc {
  running = true;
  exitInfo = '';
  private readonly exited: Promise<void>;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    private readonly logFile: string,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.running = false;
        this.exitInfo = signal ? `signal ${signal}` : `code ${code}`;
        resolve();
      });
    });
  }

  static start(name: string, bin: string, args: string[], logFile: string, watchdog: Watchdog): Proc {
    const fd = fs.openSync(logFile, 'a');
    try {
      fs.writeSync(fd, `\n==== ${new Date().toISOString()} ${bin} ${args.join(' ')}\n`);
      const child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd] });
      if (child.pid === undefined) throw new Error(`cannot start ${bin}`);
      child.unref();
      watchdog.watch(child.pid);
      return new Proc(name, child, logFile);
    } finally {
      fs.closeSync(fd);
    }
  }

  /** SIGTERM the process group, SIGKILL it if it has not exited after graceMs. */
  async stop(graceMs: number): Promise<void> {
    if (!this.running) return;
    this.signal('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs)));
    const exited = await Promise.race([this.exited.then(() => true), timedOut]);
    clearTimeout(timer);
    if (!exited) {
      this.signal('SIGKILL');
      await this.exited;
    }
  }

  killSync(): void {
    if (this.running) this.signal('SIGKILL');
  }

  private signal(sig: NodeJS.Signals): void {
    try {
      process.kill(-this.child.pid!, sig);
    } catch {
      /* already gone */
    }
  }

  logTail(lines = 40): string {
    try {
      return fs.readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

/**
 * A tiny shell process holding the read end of a pipe from this Node process. If Node dies without
 * cleaning up (crash, SIGKILL, jest killed), the pipe reaches EOF and the watchdog SIGKILLs every
 * process group it was told about and removes the temp dir. On a clean stop it is SIGKILLed itself.
 */
class Watchdog {
  private readonly child: ChildProcess;

  constructor(dirToRemove: string | undefined) {
    const script = 'while read -r g; do gs="$gs $g"; done; for g in $gs; do kill -9 "-$g" 2>/dev/null; done; ' + 'if [ -n "$1" ]; then sleep 0.2; rm -rf -- "$1"; fi';
    this.child = spawn('/bin/sh', ['-c', script, 'kpng-controlplane-watchdog', dirToRemove ?? ''], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    this.child.unref();
    // Neither the process nor its pipe may keep Node (or jest) alive.
    (this.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    this.child.stdin?.on('error', () => undefined);
  }

  watch(pgid: number): void {
    this.child.stdin?.write(`${pgid}\n`);
  }

  release(): void {
    try {
      if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    } catch {
      /* gone */
    }
    this.child.stdin?.destroy();
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const h of live) h.stopSync();
  });
}

function splitPems(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? [];
}

function sleep(msec: number): Promise<void> {
  return new Promise((r) => setTimeout(r, msec));
}

function ms(t: number): string {
  return `${Math.round(performance.now() - t)} ms`;
}

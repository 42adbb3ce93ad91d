// A small JSON client for the bench's own API traffic (creating the load, listing, watching), from any
// kubeconfig: credentials through @kubernetes/client-node's KubeConfig (certificates, tokens, exec
// plugins), requests over node:https with keep-alive (a TLS handshake per request would be most of a
// create's cost).
import * as http from 'node:http';
import * as https from 'node:https';
import { kubeConfigClass } from '../../src/source/kube/client-node';
import { onLines } from '../vs-upstream/kernel';

export interface ApiResult<T = any> { status: number; body: T; text: string }

export interface WatchEvent<T = any> { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR'; object: T }

/** Where the API server is and how a request authenticates (CA, client certificate, token headers). */
export interface KubeAccess { server: string; apply(o: https.RequestOptions): Promise<void> }

/** The access a kubeconfig gives (default: $KUBECONFIG, ~/.kube/config, in-cluster). */
export function accessFromKubeconfig(kubeconfig?: string): KubeAccess {
  const KubeConfig = kubeConfigClass();
  const kc = new KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`kubeconfig ${kubeconfig ?? '(default)'}: no current cluster`);
  return { server: cluster.server, apply: (o) => kc.applyToHTTPSOptions(o) };
}

export class Kube {
  readonly server: string;
  private readonly agent: https.Agent;
  private readonly apply: (o: https.RequestOptions) => Promise<void>;

  constructor(access: KubeAccess) {
    this.server = access.server;
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 32 });
    this.apply = access.apply;
  }

  private async options(method: string, contentType?: string): Promise<https.RequestOptions> {
    const o: https.RequestOptions = { method, agent: this.agent, headers: { Accept: 'application/json', ...(contentType ? { 'Content-Type': contentType } : {}) } };
    await this.apply(o);
    o.agent = this.agent;
    return o;
  }

  /** One request; never throws on an HTTP status (the caller decides), only when no response came. */
  async request<T = any>(method: string, path: string, body?: unknown, contentType = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'): Promise<ApiResult<T>> {
    const o = await this.options(method, body === undefined ? undefined : contentType);
    // A length, never chunked encoding: with chunked DELETEs on kept-alive connections kube-apiserver
    // answered some requests with a bare 400 (seen on half the deletes of a load).
    const payload = body === undefined ? undefined : JSON.stringify(body);
    o.headers = { ...o.headers, 'Content-Length': String(payload === undefined ? 0 : Buffer.byteLength(payload)) };
    return new Promise((resolve, reject) => {
      const req = https.request(new URL(this.server + path), o, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: any;
          try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
          resolve({ status: res.statusCode ?? 0, body: parsed, text });
        });
        res.on('error', reject);
      });
      req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${path}: no answer within 60 s`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** A request that must succeed (2xx, or one of `ok`); retried on 429/5xx and on connection errors. */
  async must<T = any>(method: string, path: string, body?: unknown, ok: number[] = []): Promise<ApiResult<T>> {
    for (let attempt = 1; ; attempt++) {
      let r: ApiResult<T> | undefined;
      let err: unknown;
      try { r = await this.request<T>(method, path, body); } catch (e) { err = e; }
      if (r && ((r.status >= 200 && r.status < 300) || ok.includes(r.status))) return r;
      const retriable = !r || r.status === 429 || r.status >= 500;
      if (!retriable || attempt >= 8) {
        throw new Error(`${method} ${path}: ${r ? `HTTP ${r.status}: ${r.text.slice(0, 300)}` : String(err)}`);
      }
      await new Promise((res) => setTimeout(res, 250 * attempt));
    }
  }

  /** Every item of a list, page by page. */
  async list<T = any>(path: string, query = ''): Promise<{ items: T[]; resourceVersion: string }> {
    const items: T[] = [];
    let cont = '';
    let rv = '';
    do {
      const q = new URLSearchParams(query);
      q.set('limit', '500');
      if (cont) q.set('continue', cont);
      const r = await this.must(`GET`, `${path}?${q}`);
      items.push(...(r.body.items ?? []));
      cont = r.body.metadata?.continue ?? '';
      rv = r.body.metadata?.resourceVersion ?? rv;
    } while (cont);
    return { items, resourceVersion: rv };
  }

  /**
   * A watch from `resourceVersion`; `onEvent` gets each event as it arrives. Resolves with a stop
   * function once the response headers came. The stream ending (the server's timeout) calls `onEnd`.
   */
  async watch<T = any>(path: string, resourceVersion: string, onEvent: (e: WatchEvent<T>) => void, onEnd: (err?: Error) => void): Promise<() => void> {
    const o = await this.options('GET');
    o.agent = new https.Agent({ keepAlive: false }); // a stream of its own, never a pooled socket
    const q = new URLSearchParams({ watch: '1', resourceVersion, allowWatchBookmarks: 'true', timeoutSeconds: '3600' });
    return new Promise((resolve, reject) => {
      const req = https.request(new URL(`${this.server}${path}?${q}`), o, (res: http.IncomingMessage) => {
        if (res.statusCode !== 200) { reject(new Error(`watch ${path}: HTTP ${res.statusCode}`)); res.resume(); return; }
        onLines(res, (line) => { if (line.trim()) onEvent(JSON.parse(line)); });
        res.on('end', () => onEnd());
        res.on('error', (e) => onEnd(e));
        resolve(() => req.destroy());
      });
      req.on('error', (e) => { reject(e); onEnd(e); });
      req.end();
    });
  }

  close(): void { this.agent.destroy(); }
}

// Health-check node ports (kube-proxy's ServiceHealthServer, pkg/proxy/healthcheck/service_health.go):
// for every service with a healthCheckNodePort (externalTrafficPolicy Local load balancers), an HTTP
// server on that port, on the addresses node ports use, answering 200 when this node has local ready
// endpoints and the proxy is healthy, else 503, with upstream's JSON body and the
// X-Load-Balancing-Endpoint-Weight header. Servers open and close as services come and go; a port that
// cannot be bound is retried.
import http from 'node:http';
import os from 'node:os';
import { NODE_KEY, type NodeInfo, type Service } from '../model/enls';
import { cidrContains } from '../model/ip';
import type { Batch, StateView } from '../sink/sink';
import { closeServer, formatAddress, listen } from '../util/http-serve';
import type { Logger } from '../util/log';

export interface HealthCheckTarget { namespace: string; name: string; port: number; localEndpoints: number }
export interface ListenAddress { host: string; ipv6Only: boolean }

/** The health check a service needs, or null. Counts distinct local ready (not terminating) endpoint
 *  IPs over all its ports and families, as upstream's LocalReadyEndpoints. */
export function healthCheckOf(svc: Service): HealthCheckTarget | null {
  if (!svc.healthCheckNodePort) return null;
  const ips = new Set<string>();
  for (const sp of svc.ports) for (const ep of sp.localEndpoints) if (!ep.terminating) ips.add(ep.ip);
  return { namespace: svc.namespace, name: svc.name, port: svc.healthCheckNodePort, localEndpoints: ips.size };
}

/** Where health-check node ports listen: the node-port addresses of this node (wildcards for 0.0.0.0/0
 *  and ::/0, the address itself for host CIDRs, local interface addresses inside other CIDRs). */
export function listenAddresses(node: NodeInfo | undefined, interfaces: NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces()): ListenAddress[] {
  if (!node) return [];
  const local = Object.values(interfaces).flatMap((l) => l ?? []).map((i) => i.address);
  const out = new Map<string, ListenAddress>();
  for (const [cidrs, wildcard, hostBits] of [[node.nodePortAddresses.v4, '0.0.0.0', 32], [node.nodePortAddresses.v6, '::', 128]] as const) {
    if (cidrs.some((c) => c === `${wildcard}/0`)) {
      // A wildcard only for a family this host has at all (binding :: fails where IPv6 is off).
      if (local.some((a) => a.includes(':') === (wildcard === '::'))) out.set(wildcard, { host: wildcard, ipv6Only: wildcard === '::' });
      continue;
    }
    for (const c of cidrs) {
      const [ip, bits] = c.split('/');
      const hosts = Number(bits) === hostBits ? [ip] : local.filter((a) => cidrContains(c, a));
      for (const h of hosts) out.set(h, { host: h, ipv6Only: h.includes(':') });
    }
  }
  return [...out.values()];
}

/** Upstream's body, byte for byte (tab indented). */
export function healthCheckBody(t: HealthCheckTarget, proxyHealthy: boolean): string {
  return JSON.stringify({ service: { namespace: t.namespace, name: t.name }, localEndpoints: t.localEndpoints, serviceProxyHealthy: proxyHealthy }, null, '\t');
}

interface Instance { target: HealthCheckTarget; servers: http.Server[]; addresses: string }

export interface ServiceHealthOptions {
  log: Logger;
  /** The proxy's own health (upstream's serviceProxyHealthy: node eligibility not included). */
  proxyHealthy: () => boolean;
  /** How often ports that failed to bind are retried, ms. */
  retryMs?: number;
  interfaces?: () => NodeJS.Dict<os.NetworkInterfaceInfo[]>;
}

export class ServiceHealthServer {
  /** What the state asks for, by service item key. */
  private readonly wanted = new Map<string, HealthCheckTarget>();
  private readonly open = new Map<string, Instance>();
  private addresses: ListenAddress[] = [];
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly opts: ServiceHealthOptions) {}

  /** Follows one applied batch (call after the sink applied it). */
  applyBatch(batch: Batch, state: StateView): Promise<void> {
    if (batch.reset) {
      this.wanted.clear();
      for (const item of state.items()) this.want(item.key, item.service ?? null);
    } else {
      for (const ch of batch.changes) this.want(ch.key, ch.op === 'set' ? ch.item.service ?? null : null);
    }
    if (batch.reset || batch.changes.some((c) => c.key === NODE_KEY)) {
      this.addresses = listenAddresses(state.get(NODE_KEY)?.node ?? undefined, this.opts.interfaces?.());
    }
    return this.reconcile();
  }

  /** Open ports, by "ns/name" (for tests and logs). */
  ports(): Map<string, { port: number; localEndpoints: number; listening: number }> {
    const m = new Map<string, { port: number; localEndpoints: number; listening: number }>();
    for (const i of this.open.values()) m.set(`${i.target.namespace}/${i.target.name}`, { port: i.target.port, localEndpoints: i.target.localEndpoints, listening: i.servers.length });
    return m;
  }

  private want(key: string, svc: Service | null): void {
    if (!key.startsWith('svc/')) return;
    const t = svc ? healthCheckOf(svc) : null;
    if (t) this.wanted.set(key, t); else this.wanted.delete(key);
  }

  /** Serialized: one reconcile at a time. */
  private reconcile(): Promise<void> {
    this.running = this.running.then(() => this.reconcileNow());
    return this.running;
  }

  private async reconcileNow(): Promise<void> {
    if (this.closed) return;
    const addrKey = this.addresses.map((a) => a.host).join(',');
    for (const [key, inst] of [...this.open]) {
      const t = this.wanted.get(key);
      if (!t || t.port !== inst.target.port || inst.addresses !== addrKey) {
        this.open.delete(key);
        this.opts.log.info(`health check: closing port ${inst.target.port} of ${inst.target.namespace}/${inst.target.name}`);
        await Promise.all(inst.servers.map(closeServer));
      } else {
        inst.target = t; // endpoint count updates in place
      }
    }
    let failed = false;
    for (const [key, t] of this.wanted) {
      if (this.open.has(key) || this.addresses.length === 0) continue;
      const inst: Instance = { target: t, servers: [], addresses: addrKey };
      try {
        for (const a of this.addresses) {
          const server = http.createServer((req, res) => this.answer(inst, req, res));
          await listen(server, { host: a.host, port: t.port }, a.ipv6Only);
          inst.servers.push(server);
        }
        this.open.set(key, inst);
        this.opts.log.info(`health check: ${t.namespace}/${t.name} on port ${t.port} (${this.addresses.map((a) => formatAddress(a.host, t.port)).join(', ')})`);
      } catch (e) {
        failed = true;
        // Close what was opened, so a later retry (or another owner of the port) starts clean.
        await Promise.all(inst.servers.map(closeServer));
        this.opts.log.error(`health check: cannot open port ${t.port} for ${t.namespace}/${t.name}: ${(e as Error).message}; will retry`);
      }
    }
    clearTimeout(this.retry);
    if (failed && !this.closed) {
      this.retry = setTimeout(() => void this.reconcile(), this.opts.retryMs ?? 5000);
      this.retry.unref();
    }
  }

  private answer(inst: Instance, req: http.IncomingMessage, res: http.ServerResponse): void {
    const t = inst.target;
    const healthy = this.opts.proxyHealthy();
    res.writeHead(t.localEndpoints !== 0 && healthy ? 200 : 503, {
      'Content-Type': 'application/json',
      'X-Content-Type-Options': 'nosniff',
      'X-Load-Balancing-Endpoint-Weight': String(t.localEndpoints),
    });
    res.end(req.method === 'HEAD' ? undefined : healthCheckBody(t, healthy));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.running;
    const all = [...this.open.values()];
    this.open.clear();
    await Promise.all(all.flatMap((i) => i.servers.map(closeServer)));
  }
}

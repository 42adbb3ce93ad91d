// What a service proxy left on this node, read from the kernel (netlink, x_tables sockopts, /proc),
// without changing anything: for `kpng migrate-check`, which tells an operator what moving this node
// from kube-proxy to kpng changes. Each reading that fails is reported as such, never guessed.
import fs from 'node:fs';
import { realSysctlIO } from '../config/conntrack';
import { ROUTE_LOCALNET } from '../config/route-localnet';
import { ipvsDump } from '../native/ipvs';
import type { NativeCallOptions } from '../native';
import { listLegacyKubeProxyChains } from './iptables-legacy';
import { isKubeProxyChain, XTABLES_TABLES } from './iptables-nft';
import { listJumps, listTables } from './nft-listing';
import { KPNG_NFT_TABLES, UPSTREAM_NFT_TABLE } from './nft-tables';

/** One of kube-proxy's iptables chains, "family table chain", with its rule count. */
export interface SurveyChain { family: 'ip' | 'ip6'; table: string; chain: string; rules: number }

/** A reading, or why it could not be made. */
export type Reading<T> = { ok: true; value: T } | { ok: false; error: string };

export interface NodeSurvey {
  /** kube-proxy's nftables tables ("ip kube-proxy", "ip6 kube-proxy"). */
  upstreamNftTables: Reading<string[]>;
  /** kpng's own nftables tables already there. */
  kpngNftTables: Reading<string[]>;
  /** kube-proxy's chains as iptables-nft made them. */
  iptablesNft: Reading<SurveyChain[]>;
  /** kube-proxy's chains in iptables-legacy (x_tables). */
  iptablesLegacy: Reading<SurveyChain[]>;
  /** IPVS virtual services (0 when IPVS is not loaded). */
  ipvsServices: Reading<number>;
  /** net.ipv4.conf.all.route_localnet (null: unreadable). */
  routeLocalnet: number | null;
  /** Whether /proc/sys/net can be written (a container without privileges cannot). */
  procSysWritable: boolean;
  /** Ports of kube-proxy's servers (10249 metrics, 10256 health) something already listens on. */
  portsInUse: number[];
}

const PROXY_PORTS = [10249, 10256];

async function reading<T>(f: () => Promise<T>): Promise<Reading<T>> {
  try {
    return { ok: true, value: await f() };
  } catch (e) {
    const err = e as { code?: string; message?: string };
    return { ok: false, error: `${err.code ? `${err.code}: ` : ''}${err.message ?? String(e)}` };
  }
}

async function iptablesNftChains(call: NativeCallOptions): Promise<SurveyChain[]> {
  const out: SurveyChain[] = [];
  for (const t of await listTables(call)) {
    if ((t.family !== 'ip' && t.family !== 'ip6') || !XTABLES_TABLES.includes(t.name)) continue;
    const listing = await listJumps(t, call);
    for (const c of listing.chains) if (!c.base && isKubeProxyChain(c.name)) out.push({ family: t.family, table: t.name, chain: c.name, rules: c.rules });
  }
  return out;
}

/** Local TCP ports in LISTEN state among `ports` (/proc/net/tcp and tcp6 of this network namespace). */
export function listeningPorts(ports: readonly number[], read: (path: string) => string = (p) => fs.readFileSync(p, 'utf8')): number[] {
  const found = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try { text = read(file); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; st 0A is LISTEN.
      if (f.length < 4 || f[3] !== '0A') continue;
      const port = parseInt(f[1]!.split(':')[1] ?? '', 16);
      if (ports.includes(port)) found.add(port);
    }
  }
  return [...found].sort((a, b) => a - b);
}

function procSysWritable(): boolean {
  try {
    // access() says yes on a read-only mount too (root): statfs is not reachable from Node, so open for writing.
    fs.closeSync(fs.openSync(ROUTE_LOCALNET, 'r+'));
    return true;
  } catch {
    return false;
  }
}

/** Reads the node (this process's network namespace, or `call.netns` for the kernel objects). */
export async function surveyNode(call: NativeCallOptions = {}): Promise<NodeSurvey> {
  const tables = await reading(() => listTables(call));
  const named = (names: readonly string[]): Reading<string[]> => (tables.ok
    ? { ok: true, value: tables.value.filter((t) => (t.family === 'ip' || t.family === 'ip6' || t.family === 'inet') && names.includes(t.name)).map((t) => `${t.family} ${t.name}`) }
    : tables);
  return {
    upstreamNftTables: named([UPSTREAM_NFT_TABLE]),
    kpngNftTables: named(KPNG_NFT_TABLES),
    iptablesNft: await reading(() => iptablesNftChains(call)),
    iptablesLegacy: await reading(() => listLegacyKubeProxyChains(call)),
    ipvsServices: await reading(async () => {
      try {
        return (await ipvsDump(call)).length;
      } catch (e) {
        // No IPVS in this kernel (the generic netlink family is unknown): nothing of it to find.
        if (['ENOENT', 'EOPNOTSUPP', 'ENOTSUP'].includes((e as { code?: string }).code ?? '')) return 0;
        throw e;
      }
    }),
    routeLocalnet: realSysctlIO.read(ROUTE_LOCALNET),
    procSysWritable: procSysWritable(),
    portsInUse: listeningPorts(PROXY_PORTS),
  };
}

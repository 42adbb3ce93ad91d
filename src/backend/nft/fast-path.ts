// The fast path (opt-in, --nft-flowtable): service connections that the kernel has seen both ways are
// offloaded to an nftables flowtable on the node's interfaces, so their later packets are forwarded
// from the ingress hook without walking prerouting, forward and postrouting again. Only forwarded
// traffic benefits (pod to service across nodes, outside to node ports and load-balancer IPs); the
// kernel offloads TCP and UDP only, and tears a flow down when its conntrack entry goes (kpng's UDP
// clean-up) or on TCP FIN/RST.
//
// This module decides the flowtable's devices at each full sync, and checks once that the kernel has
// flowtables at all: without them the fast path is off (said once), never a failing sync.
import type { LinkRow } from '../../native/rtnl';
import type { FastPathSpec } from './types';

export const IFF_UP = 0x1, IFF_LOOPBACK = 0x8;

/** Packets a connection must have carried (both ways) before it is offloaded (KEP-4963 proposes 20). */
export const DEFAULT_MIN_PACKETS = 20;

export interface FastPathConfig {
  /** 'auto': every link that can forward; else the interfaces named. */
  interfaces: 'auto' | string[];
  minPackets: number;
}

/** Parses --nft-flowtable: '' (off), 'auto', or interface names separated by commas. */
export function parseFastPathInterfaces(value: string): FastPathConfig['interfaces'] | undefined {
  const v = value.trim();
  if (v === '') return undefined;
  if (v === 'auto') return 'auto';
  const names = v.split(',').map((s) => s.trim()).filter(Boolean);
  for (const n of names) {
    if (!/^[A-Za-z0-9_.@:-]{1,15}$/.test(n)) throw new RangeError(`--nft-flowtable: bad interface name ${JSON.stringify(n)} (use "auto" or names separated by commas)`);
  }
  return names;
}

/**
 * The devices for the flowtable, from the node's links: with 'auto', every link that is up and is not
 * loopback. Bridge ports included: the kernel resolves a flow's path through a bridge to the port the
 * packets arrive on, and matches them there, before the bridge (and br_netfilter, which NATs bridged
 * packets before the bridge device's own ingress) sees them; a bridge whose ports are left out offloads
 * nothing that arrives through it. Named interfaces: the ones that exist. The kernel refuses a
 * flowtable naming a device that does not exist, so absent names are reported, not sent.
 */
export function chooseDevices(cfg: FastPathConfig, links: readonly LinkRow[]): { devices: string[]; missing: string[] } {
  if (cfg.interfaces === 'auto') {
    const devices = links.filter((l) => (l.flags & IFF_UP) !== 0 && (l.flags & IFF_LOOPBACK) === 0).map((l) => l.name);
    return { devices: devices.sort(), missing: [] };
  }
  const have = new Set(links.map((l) => l.name));
  return { devices: cfg.interfaces.filter((n) => have.has(n)), missing: cfg.interfaces.filter((n) => !have.has(n)) };
}

export interface FastPathDeps {
  listLinks(): Promise<LinkRow[]>;
  /** Resolves when the kernel takes a flowtable and a `flow add` rule (in a batch that changes nothing); rejects otherwise. */
  probe(): Promise<void>;
  log(msg: string): void;
}

/** The fast path's state across syncs: kernel support (checked once) and the devices last used. */
export class FastPath {
  private supported: Promise<boolean> | undefined;
  private lastDevices = '';
  private lastMissing = '';
  /** The devices the tables' flowtable was last given (the last spec or grown()). */
  private current = new Set<string>();

  constructor(readonly config: FastPathConfig, private readonly deps: FastPathDeps) {}

  /** What the next full sync programs; undefined: no fast path (unsupported, or no device). */
  async spec(): Promise<FastPathSpec | undefined> {
    this.supported ??= this.deps.probe().then(() => true, (e: Error) => {
      this.deps.log(`nft fast path: off, the kernel refused a flowtable (${e.message}); it needs nf_flow_table (CONFIG_NF_FLOW_TABLE, CONFIG_NFT_FLOW_OFFLOAD)`);
      return false;
    });
    if (!(await this.supported)) return undefined;
    let links: LinkRow[];
    try {
      links = await this.deps.listLinks();
    } catch (e) {
      this.deps.log(`nft fast path: cannot list the node's interfaces (${(e as Error).message}); this sync goes without it`);
      return undefined;
    }
    const { devices, missing } = chooseDevices(this.config, links);
    const m = missing.join(',');
    if (m !== this.lastMissing && m) this.deps.log(`nft fast path: interface(s) ${m} not found on this node; left out of the flowtable until they exist`);
    this.lastMissing = m;
    const d = devices.join(',');
    if (d !== this.lastDevices) {
      this.deps.log(d ? `nft fast path: flowtable on ${devices.join(', ')}, offloading service connections after ${this.config.minPackets} packets` : 'nft fast path: no interface to offload on; off until one appears');
      this.lastDevices = d;
    }
    this.current = new Set(devices);
    return devices.length ? { devices, minPackets: this.config.minPackets } : undefined;
  }

  /**
   * Between full syncs: the devices when links appeared that the flowtable lacks (a new pod's veth),
   * else undefined. Called on incremental syncs while the tables hold a flowtable: adding devices to
   * an existing flowtable keeps its offloaded flows.
   */
  async grown(): Promise<FastPathSpec | undefined> {
    if (this.config.interfaces !== 'auto' && this.lastMissing === '') return undefined;
    let links: LinkRow[];
    try {
      links = await this.deps.listLinks();
    } catch {
      return undefined; // the next full sync lists them again
    }
    const { devices } = chooseDevices(this.config, links);
    const added = devices.filter((d) => !this.current.has(d));
    if (added.length === 0) return undefined;
    for (const d of added) this.current.add(d);
    if (this.config.interfaces !== 'auto') this.lastMissing = this.config.interfaces.filter((n) => !this.current.has(n)).join(',');
    this.deps.log(`nft fast path: flowtable gains ${added.join(', ')}`);
    return { devices: [...this.current].sort(), minPackets: this.config.minPackets };
  }
}

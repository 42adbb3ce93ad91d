// Running kpng against the lab's node n1.
//  - 'cli' mode (the acceptance path): `node dist/src/cli/main.js file --input F --node n1 --to nft
//    --cluster-cidr ...` inside n1, through the native addon. Needs `npm run build` and the addon.
//  - 'native' mode: the same pipeline in the test process, the nft sink going through the native addon
//    with its netlink socket opened inside n1 (no build of dist/ needed).
//  - 'text' mode (before the addon exists): the same pipeline (file source, store, node state,
//    runner) in the test process, with the nft sink writing through `nft -f` inside n1.
// Choose with KPNG_E2E_MODE=cli|native|text; by default cli when dist/ and the addon are there, else
// native when the addon loads, else text; under KPNG_TEST_STRICT=1 (`make test`) cli or an error.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { nftKernelSink, type NftKernel } from '../../../src/backend/nft/sink';
import { modelOptions } from '../../../src/model/options';
import { toNftText } from '../../../src/backend/nft/text';
import { ClusterStore } from '../../../src/store/cluster';
import { NodeState } from '../../../src/store/node-state';
import { FileSource } from '../../../src/source/file-source';
import { runSink } from '../../../src/runner';
import { createLogger } from '../../../src/util/log';
import { nativeKernel } from '../../../src/backend/nft';
import { nativeAvailable as nativeLoads } from '../../../src/native';
import { NODE_BIN, type Lab } from './lab';
import { KpngProcess } from '../../shared/kpng-process';
import { strictTests } from '../../helpers/strict';
import { Aggregator } from '../../../src/aggregator/aggregator';
import { aggregatorKernel } from '../../../src/backend/nft/aggregator-kernel';
import { nativeTransport } from '../../../src/nft/transport';
import * as native from '../../../src/native';

// The repository root, whether this runs from test/e2e/lab (jest) or dist/test/e2e/lab (the demo).
const ROOT = path.resolve(__dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`), '../../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');

export type KpngMode = 'cli' | 'native' | 'text';

export function nativeAvailable(): boolean {
  return nativeLoads();
}

function distNativeLoads(): boolean {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const n = require(path.join(ROOT, 'dist/src/native')) as { nativeAvailable?: () => boolean };
    return typeof n.nativeAvailable === 'function' && n.nativeAvailable();
  } catch {
    return false;
  }
}

export function kpngMode(): KpngMode {
  const m = process.env.KPNG_E2E_MODE;
  if (m === 'cli' || m === 'text' || m === 'native') return m;
  const lacks = [
    ...(fs.existsSync(CLI) && fs.existsSync(path.join(ROOT, 'dist/src/backend/nft/index.js')) ? [] : ['dist/ is not built']),
    ...(distNativeLoads() ? [] : ['dist/src/native does not load the addon']),
  ];
  if (lacks.length === 0) return 'cli';
  // `make test` runs the acceptance path: a quiet fall back (the text mode has no conntrack path) would
  // test less than it claims.
  if (strictTests()) throw new Error(`KPNG_TEST_STRICT=1 (make test): the e2e lab runs kpng from dist/ (cli mode) but ${lacks.join(' and ')}: run \`make build\`, or choose a mode with KPNG_E2E_MODE=cli|native|text`);
  return nativeLoads() ? 'native' : 'text';
}

/** A kernel that renders ops as text and runs `nft -f` inside a namespace (tests only). */
export function textKernel(ns: string, onText?: (t: string) => void): NftKernel {
  return {
    async apply(table, famOps) {
      const text = famOps.map((f) => toNftText(f.fam, table, f.ops)).join('');
      onText?.(text);
      const t0 = process.hrtime.bigint();
      execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: text, stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 1 << 30 });
      return { messages: text.split('\n').length, bytes: text.length, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
    },
    async conntrackDelete() {
      return 0; // no conntrack tool here; the native path does it
    },
  };
}

export interface KpngOptions {
  clusterCIDRs?: string[];
  masqueradeAll?: boolean;
  /** --nodeport-addresses values (default: the node's primary addresses). */
  nodePortAddresses?: string[];
  /** --detect-local-mode, --pod-bridge-interface, --pod-interface-name-prefix, --bind-address. */
  detectLocalMode?: string;
  podBridgeInterface?: string;
  podInterfaceNamePrefix?: string;
  bindAddress?: string;
  /** --localhost-nodeports (kube-proxy's iptables mode). */
  localhostNodePorts?: boolean;
  minSyncPeriod?: string;
  mode?: KpngMode;
  /**
   * Through the aggregator: an Aggregator of the test process (native mode: kpng connects to it as
   * producer "kpng"), or true (cli mode: `--aggregator`). KPNG_E2E_AGGREGATOR=1 sets true by default.
   */
  aggregator?: Aggregator | boolean;
  /**
   * --nft-flowtable (the fast path: "auto" or interface names; cli mode only). KPNG_E2E_FLOWTABLE sets
   * it by default, so that every lab test can run with the fast path on (a kernel with flowtables: the guest).
   */
  flowtable?: string;
  /** --nft-flowtable-packets. */
  flowtablePackets?: number;
}

export class Kpng {
  private lines: string[] = [];
  private stopFn: () => Promise<void> = async () => {};
  readonly mode: KpngMode;

  private constructor(readonly lab: Lab, readonly file: string, private opts: KpngOptions) {
    this.mode = opts.mode ?? kpngMode();
    if (opts.aggregator === undefined && process.env.KPNG_E2E_AGGREGATOR === '1') this.opts = { ...opts, aggregator: true };
    if (opts.flowtable === undefined && process.env.KPNG_E2E_FLOWTABLE) {
      // With KPNG_E2E_FLOWTABLE_PACKETS=0 the lab's short probes are offloaded too, once established.
      const packets = process.env.KPNG_E2E_FLOWTABLE_PACKETS;
      this.opts = { ...this.opts, flowtable: process.env.KPNG_E2E_FLOWTABLE, ...(packets ? { flowtablePackets: Number(packets) } : {}) };
    }
    if (this.opts.flowtable && this.mode !== 'cli') throw new Error(`the fast path (flowtable ${this.opts.flowtable}) is tested through the CLI only, not in ${this.mode} mode`);
  }

  // Under the qemu guest's emulated CPU a first sync takes many times longer.
  static async start(lab: Lab, file: string, opts: KpngOptions = {}, firstSyncMs = process.env.KPNG_IN_GUEST === '1' ? 40000 : 20000): Promise<Kpng> {
    const k = new Kpng(lab, file, opts);
    await k.launch();
    await k.waitSyncs(1, firstSyncMs);
    // A suite run meant to test the fast path (KPNG_E2E_FLOWTABLE) must not quietly test without it.
    if (k.opts.flowtable && process.env.KPNG_E2E_FLOWTABLE && !/nft fast path: flowtable on /.test(k.log)) throw new Error(`kpng started without its fast path (--nft-flowtable ${k.opts.flowtable}); log:\n${k.log}`);
    return k;
  }

  /** Log lines so far. */
  get log(): string {
    return this.lines.join('\n');
  }

  /** Number of successful syncs logged by the nft sink. */
  get syncs(): number {
    return this.lines.filter((l) => /nft: revision \d+: .* sync, /.test(l)).length;
  }

  async waitSyncs(n: number, timeoutMs = 10000): Promise<void> {
    const t0 = Date.now();
    while (this.syncs < n) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`kpng did not sync ${n} times in ${timeoutMs} ms; log:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private async launch(): Promise<void> {
    const cidrs = this.opts.clusterCIDRs ?? ['10.244.0.0/16', 'fd00:244::/32'];
    const period = this.opts.minSyncPeriod ?? '200ms';
    if (this.mode === 'cli') {
      const args = ['file', '--input', this.file, '--node', 'n1', '--to', 'nft', '--min-sync-period', period,
        ...cidrs.flatMap((c) => ['--cluster-cidr', c]), ...(this.opts.masqueradeAll ? ['--masquerade-all'] : []),
        ...(this.opts.nodePortAddresses ?? []).flatMap((c) => ['--nodeport-addresses', c]),
        ...(this.opts.localhostNodePorts ? ['--localhost-nodeports'] : []),
        ...([['detect-local-mode', this.opts.detectLocalMode], ['pod-bridge-interface', this.opts.podBridgeInterface],
          ['pod-interface-name-prefix', this.opts.podInterfaceNamePrefix], ['bind-address', this.opts.bindAddress]] as const)
          .flatMap(([flag, value]) => (value === undefined ? [] : [`--${flag}`, value])),
        ...(this.opts.aggregator ? ['--aggregator'] : []),
        ...(this.opts.flowtable ? ['--nft-flowtable', this.opts.flowtable] : []),
        ...(this.opts.flowtablePackets !== undefined ? ['--nft-flowtable-packets', String(this.opts.flowtablePackets)] : [])];
      // Started through the lab, which kills it with the lab whatever happens.
      const proc = new KpngProcess(args, { spawn: ([cmd, ...rest]) => this.lab.spawnIn(this.lab.ns.n1, cmd, rest), node: NODE_BIN, testServers: false });
      this.lines = proc.lines;
      this.stopFn = async () => { await proc.stop(); };
      return;
    }
    const logger = createLogger('info', (l) => this.lines.push(l));
    const o = this.opts;
    const model = modelOptions({
      clusterCIDRs: cidrs, masqueradeAll: !!o.masqueradeAll, nodePortAddresses: o.nodePortAddresses,
      detectLocalMode: o.detectLocalMode, podBridgeInterface: o.podBridgeInterface, podInterfaceNamePrefix: o.podInterfaceNamePrefix, bindAddress: o.bindAddress,
      localhostNodePorts: o.localhostNodePorts,
    });
    const store = new ClusterStore({ log: logger, model });
    const src = new FileSource({ file: this.file, store, log: logger });
    await src.start(true);
    const state = new NodeState(store, 'n1');
    const netns = `/var/run/netns/${this.lab.ns.n1}`;
    let kernel = this.mode === 'native' ? nativeKernel({ netns }) : textKernel(this.lab.ns.n1);
    let ownAggregator: Aggregator | undefined;
    if (this.opts.aggregator && this.mode === 'native') {
      const agg = this.opts.aggregator instanceof Aggregator ? this.opts.aggregator
        : (ownAggregator = new Aggregator({ transport: nativeTransport({ netns }), log: (m) => this.lines.push(m) }));
      kernel = aggregatorKernel(agg.connect('kpng'), (f) => native.conntrackDelete(f, { netns }));
    }
    const sink = nftKernelSink({ log: (m: string) => this.lines.push(m) }, kernel);
    const ac = new AbortController();
    const ms = /ms$/.test(period) ? Number(period.slice(0, -2)) : Number(period.replace(/s$/, '')) * 1000;
    const done = runSink(state, sink, { log: logger, minSyncPeriodMs: ms, burst: 2 }, ac.signal);
    this.stopFn = async () => { ac.abort(); src.stop(); await done; ownAggregator?.close(); };
  }

  /** Stop kpng (rules stay in the kernel, as with kube-proxy). */
  async stop(): Promise<void> {
    await this.stopFn();
  }
}

/** Start a process that keeps `nft list ruleset` output for debugging. */
export function ruleset(lab: Lab): string {
  return lab.nftList(lab.ns.n1, 'ruleset');
}

export { spawn };

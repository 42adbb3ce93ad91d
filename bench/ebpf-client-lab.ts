// The lab of the benches that send a client's traffic to a cluster IP (ebpf-connect, ebpf-traffic):
// client namespace --veth-- node namespace (forwards, holds the nft table) --bridge-- pod namespace
// (the endpoint, POD:8080), an attach cgroup for the socket LB, and both dataplanes programmed
// in-process. A client runs in the attach cgroup (socket LB) or outside it (nft DNAT in the node
// namespace).
import { spawn, type ChildProcess } from 'node:child_process';
import { EbpfDataplane } from '../src/backend/ebpf';
import { NftDataplane } from '../src/backend/nft/sink';
import { nativeKernel } from '../src/backend/nft';
import { EbpfLoader, ebpfCleanup } from '../src/native/ebpf';
import { NetLab } from '../test/shared/netlab';

export const POD = '10.244.1.10';

export class EbpfClientLab {
  readonly lab: NetLab;
  readonly ns: { node: string; pod: string; client: string };
  readonly pin: string;
  cgroup = '';
  private loader?: EbpfLoader;

  constructor(prefix: string) {
    this.lab = new NetLab(prefix);
    this.ns = { node: this.lab.name('n'), pod: this.lab.name('p'), client: this.lab.name('c') };
    this.pin = `/sys/fs/bpf/${this.lab.name('pin')}`;
  }

  setup(): void {
    const { lab, ns } = this;
    for (const role of ['n', 'p', 'c']) lab.netns(role);
    lab.bridge(ns.node, 'br0', ['10.244.1.1/24']);
    lab.veth({ ns: ns.node, name: 'vp', master: 'br0' }, { ns: ns.pod, name: 'eth0', addrs: [`${POD}/24`] });
    lab.ip(ns.pod, 'route', 'add', 'default', 'via', '10.244.1.1');
    lab.veth({ ns: ns.node, name: 'vc', addrs: ['10.245.0.1/24'] }, { ns: ns.client, name: 'eth0', addrs: ['10.245.0.2/24'] });
    lab.ip(ns.client, 'route', 'add', 'default', 'via', '10.245.0.1');
    lab.sysctl(ns.node, 'net.ipv4.ip_forward=1');
    this.cgroup = lab.cgroup('cg');
  }

  /** A process in the pod namespace, resolved once it prints its first line (its "ready"). */
  async server(cmd: string, args: string[]): Promise<ChildProcess> {
    const p = spawn('nsenter', [`--net=/var/run/netns/${this.ns.pod}`, cmd, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((r) => p.stdout!.once('data', () => r()));
    return p;
  }

  /** The socket LB (maps of `entries`, pinned in the lab) and the nft part's table in the node namespace. */
  dataplanes(entries: number): { ebpf: EbpfDataplane; nft: NftDataplane } {
    const ebpf = new EbpfDataplane(async () => (this.loader = await EbpfLoader.open({ cgroup: this.cgroup, pinDir: this.pin, mapEntries: entries })), () => {}, entries);
    const nft = new NftDataplane(`kpng-${this.lab.name('t')}`, nativeKernel({ netns: `/var/run/netns/${this.ns.node}` }));
    return { ebpf, nft };
  }

  /** Reverse-NAT entries: written only by sockets the programs balanced (a sanity count). */
  async balanced(): Promise<number> {
    return (await this.loader!.dump('kpng_rev')).count;
  }

  /** A shell command running `cmd` in the client namespace, in the attach cgroup or not. */
  client(cmd: string, inCgroup: boolean): string {
    const run = `exec nsenter --net=/var/run/netns/${this.ns.client} ${cmd}`;
    return inCgroup ? `echo $$ > ${this.cgroup}/cgroup.procs && ${run}` : run;
  }

  async teardown(): Promise<void> {
    try { await ebpfCleanup(this.pin); } catch { /* nothing pinned */ }
    this.lab.destroy();
  }
}

// The privileges deploy/'s nft and eBPF DaemonSets grant are the ones kpng needs, found by running it:
// each overlay is rendered (kubectl kustomize), and kpng runs once with the container's args and
// ConfigMap in a network namespace (the node of a hostNetwork pod), as root holding only the
// capabilities the container is granted, /proc/sys and the read-only volumes read-only (as a runtime
// mounts them for a container that is not privileged). With them, the rules land; without any one of
// them, what it is for fails. The IPVS overlay: deploy-privileges.guest.test.ts (this kernel has none).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cgroup2Mount } from '../../src/backend/ebpf';
import { ebpfCleanup } from '../../src/native/ebpf';
import { KPNG, ROOT } from '../helpers/cli';
import { WEB_STATE, containerArgs, granted, held, kubectlNeed, renderOverlay, runAsContainer, type Obj } from '../helpers/deploy';
import { gated, need } from '../helpers/gate';
import { Netns } from '../helpers/netns';

const maybe = gated(need.netns(), need.native(), need.cgroup2(), need.built(KPNG), need.built(path.join(ROOT, 'build/Release/sock_lb.bpf.o')),
  kubectlNeed(), need.tool('setpriv', ['--version'], 'util-linux'), need.tool('unshare', ['--version'], 'util-linux')).describe;


// SYS_RESOURCE is granted for one thing: oom_score_adj -999 (kube-proxy's). Its absence is a warning,
// not a failure; a root without it (some sandboxes) cannot show the granted case.
const OOM_REFUSED = /cannot set oom_score_adj to -999/;

interface Case {
  overlay: 'nft' | 'ebpf';
  /** The container's read-only volumes (their mount paths): this test binds its own stand-in read-only. */
  readOnlyVolumes?: string[];
  /** Extra args: where this test keeps what the DaemonSet keeps on the node's own paths. */
  extra?: (dir: string) => string[];
  /** Whether the backend's work is in the kernel after a run in `ns`. */
  landed: (ns: Netns, dir: string) => boolean;
  cleanup?: (dir: string) => Promise<void>;
}

/** The table, holding `text` when given. */
const nftHas = (ns: Netns, table: string, text = ''): boolean => { try { return ns.nft('list', 'table', 'ip', table).includes(text); } catch { return false; } };

maybe('deploy/ overlays hold the privileges kpng needs, and no more (real kernel, netns)', () => {
  let cg = '';
  let work = '';
  beforeAll(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'dpl-priv-'));
    fs.writeFileSync(path.join(work, 'state.json'), WEB_STATE);
    cg = path.join(cgroup2Mount(fs.readFileSync('/proc/self/mountinfo', 'utf8'))!, `dpl-priv-${process.pid}`);
    fs.mkdirSync(cg);
  });
  afterAll(() => {
    if (cg) fs.rmdirSync(cg);
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  const cases: Case[] = [
    { overlay: 'nft', landed: (ns) => nftHas(ns, 'kpng', '10.96.7.7') },
    {
      overlay: 'ebpf',
      // The DaemonSet's cgroup volume is the node's whole hierarchy; here a test cgroup under it, bound
      // read-only as the manifest mounts it. Pins in a test directory of the bpffs.
      readOnlyVolumes: ['/sys/fs/cgroup'],
      extra: (dir) => ['--cgroup', cg, '--bpffs', `/sys/fs/bpf/${path.basename(dir)}`],
      // The socket LB's programs attached (their links pinned) and its nftables table for north-south.
      landed: (ns, dir) => fs.existsSync(`/sys/fs/bpf/${path.basename(dir)}/link_kpng_connect4`) && nftHas(ns, 'kpng'),
      cleanup: async (dir) => { try { await ebpfCleanup(`/sys/fs/bpf/${path.basename(dir)}`); } catch { /* nothing pinned */ } },
    },
  ];

  test('the init container (privileged, --init-only) writes kube-proxy\'s conntrack sysctls; kpng then finds them set', () => {
    const r = renderOverlay('nft');
    const init = (r.ds.spec.template.spec.initContainers as Obj[])[0];
    expect(init.securityContext).toEqual({ privileged: true });
    expect(init.args).toEqual([...r.container.args, '--init-only']);
    const established = '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established';
    const kpngRun = (ns: Netns, dir: string) => runAsContainer({ netns: ns.path, caps: granted(r.container) as string[], readOnly: ['/proc/sys'],
      args: [...containerArgs(r, dir, 'n1'), 'file', '--input', path.join(work, 'state.json'), '--once'] });
    const unset = /conntrack: cannot set \S+nf_conntrack_tcp_timeout_established = 86400: EROFS/;
    // Without the init container, kpng cannot write them (the test can fail: this is what it fixes).
    const bare = new Netns('dpl');
    try {
      bare.exec('sh', ['-c', `echo 432000 > ${established}`]);
      const res = kpngRun(bare, path.join(work, 'init-bare'));
      expect({ code: res.code, unset: unset.test(res.out) }).toEqual({ code: 0, unset: true });
      expect(bare.exec('cat', [established]).trim()).toBe('432000');
    } finally {
      bare.destroy();
    }
    const ns = new Netns('dpl');
    try {
      ns.exec('sh', ['-c', `echo 432000 > ${established}`]);
      const dir = path.join(work, 'init');
      const first = runAsContainer({ netns: ns.path, caps: 'all', readOnly: [], args: containerArgs({ ...r, container: init }, dir, 'n1') });
      expect(first.code).toBe(0);
      expect(first.out).toMatch(/init-only: privileged settings applied/);
      expect(ns.exec('cat', [established]).trim()).toBe('86400');
      const res = kpngRun(ns, dir);
      // nf_conntrack_max and the hash size exist in the first network namespace only (a real node's):
      // refused in this one, by the init container too.
      const perNetns = (l: string) => /conntrack: cannot set/.test(l) && !/nf_conntrack_max|hashsize/.test(l);
      expect({ code: res.code, unset: unset.test(res.out), warnings: res.out.split('\n').filter(perNetns) }).toEqual({ code: 0, unset: false, warnings: [] });
    } finally {
      ns.destroy();
    }
  });

  test.each(cases)('$overlay: granted, the rules land; each capability taken away, what it is for fails', async (c) => {
    const r = renderOverlay(c.overlay);
    const caps = granted(r.container);
    if (caps === 'privileged') throw new Error(`deploy/overlays/${c.overlay} is privileged: this test checks capabilities`);
    expect(r.container.securityContext.readOnlyRootFilesystem).toBe(true);
    const unheld = caps.filter((x) => !held(x));
    // Only SYS_RESOURCE may be missing from this root (its test is then the warning below).
    expect(unheld.filter((x) => x !== 'SYS_RESOURCE')).toEqual([]);
    const usable = caps.filter(held);
    // The container's read-only volumes other than its ConfigMap are the ones this case stands in for
    // (the cgroup hierarchy: the test cgroup, read-only).
    const roVolumes = (r.container.volumeMounts as Obj[]).filter((m) => m.readOnly && m.mountPath !== '/var/lib/kube-proxy').map((m) => m.mountPath);
    expect(roVolumes).toEqual(c.readOnlyVolumes ?? []);
    const readOnly = ['/proc/sys', ...(c.readOnlyVolumes?.length ? [cg] : [])];

    let n = 0;
    const run = async (have: string[]) => {
      const dir = path.join(work, `${c.overlay}-${n++}`);
      const ns = new Netns('dpl');
      try {
        const args = [...containerArgs(r, dir, 'n1'), 'file', '--input', path.join(work, 'state.json'), ...(c.extra?.(dir) ?? []), '--once'];
        const res = runAsContainer({ netns: ns.path, caps: have, readOnly, args });
        return { ...res, landed: c.landed(ns, dir) };
      } finally {
        await c.cleanup?.(dir);
        ns.destroy();
      }
    };

    const all = await run(usable);
    expect({ code: all.code, landed: all.landed }).toEqual({ code: 0, landed: true });
    if (usable.includes('SYS_RESOURCE')) expect(all.out).not.toMatch(OOM_REFUSED);
    else expect(all.out).toMatch(OOM_REFUSED);

    for (const cap of usable) {
      const without = await run(usable.filter((x) => x !== cap));
      if (cap === 'SYS_RESOURCE') {
        expect({ cap, code: without.code, landed: without.landed, oomRefused: OOM_REFUSED.test(without.out) }).toEqual({ cap, code: 0, landed: true, oomRefused: true });
      } else {
        // kpng says the kernel refused it (EPERM) and exits 1 (--once: no successful sync).
        expect({ cap, code: without.code, landed: without.landed, refused: /Operation not permitted|EPERM/.test(without.out) }).toEqual({ cap, code: 1, landed: false, refused: true });
      }
    }
  }, 180_000);
});

// deploy/overlays/ipvs under a kernel with IPVS (the qemu guest, hack/qemu/test-guest.sh): what the IPVS
// backend needs, found by running kpng once with the container's args and ConfigMap in a network
// namespace, as a runtime would run it (helpers/deploy.ts). With NET_ADMIN alone and /proc/sys
// read-only (any container that is not privileged): the kernel loads ip_vs itself on kpng's first
// request (no SYS_MODULE, no /lib/modules) and the services are programmed, but every IPVS sysctl is
// refused (EROFS) and net.ipv4.vs.conntrack stays 0, which the nftables masquerade needs. Without
// NET_ADMIN nothing is programmed. Privileged (every capability, /proc/sys writable): all of it is set.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Netns } from '../helpers/netns';
import { WEB_STATE, containerArgs, granted, kubectlNeed, renderOverlay, runAsContainer, type Obj } from '../helpers/deploy';
import { gated, need } from '../helpers/gate';

/** 10.96.7.7:80 as /proc/net/ip_vs writes it. */
const WEB_VS = 'TCP  0A600707:0050';

/** Modules loaded now, with the modules that hold each. */
function modules(): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const l of fs.readFileSync('/proc/modules', 'utf8').split('\n').filter(Boolean)) {
    const [name, , , users] = l.split(' ');
    m.set(name, users === '-' ? [] : users.split(',').filter(Boolean));
  }
  return m;
}

/** Unloads ip_vs and the modules that hold it (its schedulers), so that only the kernel can load it again. */
function unloadIpvs(): void {
  const order = (name: string): string[] => [...(modules().get(name) ?? []).flatMap(order), name];
  if (!modules().has('ip_vs')) return;
  for (const m of order('ip_vs')) {
    const r = spawnSync('rmmod', [m], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`rmmod ${m}: ${r.stderr} (this test needs ip_vs unloaded to see who loads it)`);
  }
}

const maybe = gated(need.root(), kubectlNeed(), need.tool('setpriv', ['--version'], 'util-linux'), need.tool('rmmod', ['--version'], 'kmod')).test;

maybe('deploy/overlays/ipvs: NET_ADMIN programs IPVS and the kernel loads ip_vs; the sysctls need privileged', () => {
  const r = renderOverlay('ipvs');
  expect(granted(r.container)).toBe('privileged');
  // Nothing for module loading: no SYS_MODULE, no /lib/modules.
  expect((r.ds.spec.template.spec.volumes as Obj[]).filter((v) => v.hostPath)).toEqual([]);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'dpl-ipvs-'));
  fs.writeFileSync(path.join(work, 'state.json'), WEB_STATE);
  let n = 0;
  const run = (caps: string[] | 'all', readOnly: string[]) => {
    const ns = new Netns('dpl');
    try {
      const args = [...containerArgs(r, path.join(work, `c${n++}`), 'n1'), 'file', '--input', path.join(work, 'state.json'), '--once'];
      const res = runAsContainer({ netns: ns.path, caps, readOnly, args, timeoutMs: 170_000 });
      const vs = fs.existsSync('/proc/net/ip_vs') ? ns.exec('cat', ['/proc/net/ip_vs']) : '';
      let conntrack = '';
      try { conntrack = ns.exec('cat', ['/proc/sys/net/ipv4/vs/conntrack']).trim(); } catch { /* ip_vs not loaded */ }
      return { ...res, programmed: vs.includes(WEB_VS), conntrack };
    } finally {
      ns.destroy();
    }
  };
  try {
    unloadIpvs();
    expect(modules().has('ip_vs')).toBe(false);

    // A container that is not privileged: NET_ADMIN, /proc/sys read-only.
    const capped = run(['NET_ADMIN'], ['/proc/sys']);
    expect({ code: capped.code, programmed: capped.programmed }).toEqual({ code: 0, programmed: true });
    expect(modules().has('ip_vs')).toBe(true);
    expect(capped.out).toMatch(/ipvs: sysctl net\/ipv4\/vs\/conntrack: EROFS/);
    expect(capped.conntrack).toBe('0');

    const none = run([], ['/proc/sys']);
    expect({ code: none.code, programmed: none.programmed, refused: /Operation not permitted|EPERM/.test(none.out) }).toEqual({ code: 1, programmed: false, refused: true });

    // Privileged, as the overlay is.
    const priv = run('all', []);
    expect({ code: priv.code, programmed: priv.programmed, conntrack: priv.conntrack }).toEqual({ code: 0, programmed: true, conntrack: '1' });
    expect(priv.out).not.toMatch(/EROFS/);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}, 600_000);

// --nft-flowtable on the machine's own kernel, with real packets: the netns lab, the real `kpng file`
// on n1. This machine's kernel has no flowtables (CONFIG_NF_FLOW_TABLE unset): kpng must say the fast
// path is off, once, and serve every service as without it, never fail its syncs. On a kernel that has
// flowtables the same test checks that the flowtable is there instead (the fast path's own behaviour
// is tested in the qemu guest: fast-path.guest.test.ts).
import { execFileSync } from 'node:child_process';
import { ADDR, Lab } from './lab/lab';
import { Kpng } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';

process.env.KPNG_LAB_PREFIX = 'kfp';

const d = gated(need.root()).describe;

const services: SvcSpec[] = [
  { name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }], pods: ['p1a', 'p2a'] },
];

/** Whether this kernel takes a flowtable (asked with nft in the lab's own namespace, then removed). */
function kernelHasFlowtables(ns: string): boolean {
  try {
    execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: 'add table ip kfp-probe\nadd flowtable ip kfp-probe f { hook ingress priority 0; }\ndelete table ip kfp-probe\n', stdio: ['pipe', 'pipe', 'pipe'] });
    return true;
  } catch {
    return false;
  }
}

d('--nft-flowtable on this machine\'s kernel', () => {
  let lab: Lab;
  let state: StateFile;
  let kpng: Kpng | undefined;

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write(services);
  }, 60000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
  });

  test('without flowtables in the kernel: the fast path is off (said once), services work, syncs keep succeeding', async () => {
    kpng = await Kpng.start(lab, state.file, { flowtable: 'auto' });
    const ruleset = lab.nftList(lab.ns.n1);
    if (kernelHasFlowtables(lab.ns.n1)) {
      expect(kpng.log).toMatch(/nft fast path: flowtable on /);
      expect(ruleset).toMatch(/flowtable fast-path/);
    } else {
      expect(kpng.log.match(/nft fast path: off, the kernel refused a flowtable/g)).toHaveLength(1);
      expect(ruleset).not.toMatch(/flowtable|flow add/);
    }
    const fromPod = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.10', 80, 6);
    expect(fromPod.every((r) => r.ok)).toBe(true);
    const fromOutside = await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30080, 4);
    expect(fromOutside.every((r) => r.ok)).toBe(true);
    // A change is applied as usual (the next syncs are not refused).
    const before = kpng.syncs;
    state.write([{ ...services[0], pods: ['p2a'] }]);
    await kpng.waitSyncs(before + 1);
    expect(kpng.log).not.toMatch(/sync failed|refused by the kernel/i);
  }, 60000);
});

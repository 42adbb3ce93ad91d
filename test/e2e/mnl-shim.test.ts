// native/mnl/mnl.c is the libmnl API the portable prebuilds link beside Debian's static libnftnl. The
// prebuilds are cross-built, so this proves the same file on the host: test/native/mnl_shim_test.c,
// linked with it and the system's libnftnl.a (no libmnl), programs a table, a chain, a set with
// elements and a rule in a fresh namespace, reads them back through libnftnl's parsers, sees a refused
// batch's error, and overflows a batch buffer. `nft list` is the reference.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { NetLab, run } from '../shared/netlab';
import { gated, need } from '../helpers/gate';

const ROOT = path.resolve(__dirname, '../..');
const archive = (() => {
  const r = spawnSync('gcc', ['-print-multiarch'], { encoding: 'utf8' });
  return r.status === 0 ? `/usr/lib/${r.stdout.trim()}/libnftnl.a` : '';
})();
const maybe = gated(...need.netns(), need.that('libnftnl.a (libnftnl-dev) and gcc', archive !== '' && fs.existsSync(archive),
  'install libnftnl-dev and gcc (hack/install-deps.sh does)')).describe;

maybe('the prebuilds\' libmnl API (native/mnl/mnl.c) with libnftnl, against the kernel', () => {
  let lab: NetLab;
  let dir: string;
  let bin: string;
  beforeAll(() => {
    lab = new NetLab('mnl');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-mnl-'));
    bin = path.join(dir, 'mnl-shim-test');
    run('gcc', ['-O1', '-Wall', '-Werror', '-o', bin, path.join(ROOT, 'test/native/mnl_shim_test.c'),
      path.join(ROOT, 'native/mnl/mnl.c'), archive]);
  });
  afterAll(() => {
    lab?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('links without libmnl, programs the kernel and reads it back', () => {
    expect(run('ldd', [bin])).not.toContain('libmnl');
    const ns = lab.netns('ns');
    const lines = lab.exec(ns, bin, []).trim().split('\n');
    // Set elements come back in the kernel's hash order.
    expect(lines.filter((l) => l.startsWith('elem ')).sort()).toEqual(['elem 10.0.0.1', 'elem 10.0.0.2', 'elem 192.168.7.9']);
    expect(lines.filter((l) => !l.startsWith('elem '))).toEqual([
      'portid>0=1',
      'bad batch: No such file or directory', // the rule's chain is missing: the whole batch is refused
      'good batch: accepted',
      'chain mnlt out hook=3 prio=-7 policy=1',
      'rule mnlt out exprs=payload,lookup,counter,immediate handle>0=1',
      'batch msg 1 len=36 fits=1 size=36',
      'batch msg 2 len=36 fits=0 size=36',
      'batch reset size=36 first-seq=2 u64=102030405060708 valid=0',
      'validate u64-as-u8=-1 erange=1',
    ]);
    const listed = lab.exec(ns, 'nft', ['list', 'table', 'ip', 'mnlt']);
    expect(listed).toContain('type filter hook output priority filter - 7; policy accept;');
    expect(listed).toContain('ip daddr @addrs counter packets 0 bytes 0 accept');
    expect(listed).toMatch(/timeout 1h/);
    for (const a of ['10.0.0.1', '10.0.0.2', '192.168.7.9']) expect(listed).toContain(a);
  });
});

// `kpng publish` against a real kpng: kpng (`--to nft --aggregator --aggregator-listen unix://...`)
// runs in a network namespace; `kpng publish` follows an objects file over the aggregator's unix
// socket; the tables land in the namespace's kernel next to kpng's; a bad version is refused with
// the kernel's reason while the previous objects stay; `kpng aggregator status|remove` work.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { KpngProcess, KPNG, runKpng } from '../helpers/cli';
import { Netns } from '../helpers/netns';
import { StateFile } from './lab/world';
import { gated, need } from '../helpers/gate';

const d = gated(need.netns(), need.built(KPNG)).describe;

const objects = (deny: string[], extraRule = '') => `
tables:
  - family: ip
    name: denylist
    sets:
      - name: deny
        type: ipv4_addr
        elements: [${deny.join(', ')}]
    chains:
      - name: pre
        hook: prerouting
        type: filter
        priority: -300
        rules:
          - comment: deny-list
            exprs:
              - { type: payload, base: network, offset: 12, len: 4, dreg: 1 }
              - { type: lookup, sreg: 1, set: deny }
              - { type: counter }
              - { type: verdict, verdict: drop }
${extraRule}`;

const BAD_RULE = `          - comment: bad-rule
            exprs:
              - { type: payload, base: network, offset: 12, len: 4, dreg: 1 }
              - { type: lookup, sreg: 1, set: no-such-set }
              - { type: verdict, verdict: drop }
`;

/** A line of the publisher's stdout at index >= from matching re (10 s at most). */
const published = async (p: KpngProcess, re: RegExp, from: number): Promise<string> => (await p.waitForLine(re, { from, stream: 'stdout', timeoutMs: 10000 })).line;

d('kpng publish through kpng --aggregator-listen (real kernel)', () => {
  let ns: Netns;
  let dir: string;
  let kpng: KpngProcess;
  let sock: string;
  let publish: KpngProcess | undefined;
  const file = () => path.join(dir, 'objects.yaml');
  const write = (text: string) => { fs.writeFileSync(`${file()}.tmp`, text); fs.renameSync(`${file()}.tmp`, file()); };

  beforeAll(async () => {
    ns = new Netns('kba-pub');
    dir = fs.mkdtempSync('/tmp/kba-agg-');
    sock = `unix://${dir}/aggregator.sock`;
    const state = new StateFile(dir);
    state.write([{ name: 'web', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, targetPort: 8080 }], pods: ['p1a'] }]);
    kpng = new KpngProcess(['file', '--input', state.file, '--node', 'n1', '--to', 'nft', '--aggregator', '--aggregator-listen', sock], { prefix: ['ip', 'netns', 'exec', ns.name] });
    for (let i = 0; i < 500 && !(fs.existsSync(`${dir}/aggregator.sock`) && /sync, /.test(kpng.text('stderr'))); i++) await new Promise((r) => setTimeout(r, 20));
    expect(kpng.text('stderr')).toMatch(/serving producers on unix:/);
    expect(fs.statSync(`${dir}/aggregator.sock`).mode & 0o777).toBe(0o600);
  }, 30000);

  afterAll(async () => {
    await publish?.stop();
    await kpng?.stop();
    ns?.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('publishes, follows the file, reports a refused version and keeps the previous objects', async () => {
    write(objects(['192.168.50.100']));
    publish = new KpngProcess(['publish', '--producer', 'firewall', '--file', file(), '--aggregator', sock], { testServers: false });
    await published(publish, /^firewall: .* is in the kernel \(commit \d+, \d+ ops\)/, 0);
    expect(ns.nft('list', 'set', 'ip', 'denylist', 'deny')).toMatch(/elements = \{ 192\.168\.50\.100 \}/);
    expect(ns.nft('list', 'tables')).toMatch(/table ip kpng/);
    // kpng logs who the producer is, from the socket's peer credentials.
    expect(kpng.text('stderr')).toContain(`producer firewall connected (pid ${publish.child.pid} uid ${process.getuid!()} gid ${process.getgid!()}`);

    let n = publish.stdout.length;
    write(objects(['192.168.50.100', '192.168.50.101']));
    await published(publish, /is in the kernel/, n);
    expect(ns.nft('list', 'set', 'ip', 'denylist', 'deny')).toMatch(/192\.168\.50\.101/);

    n = publish.stdout.length;
    write(objects(['192.168.50.102'], BAD_RULE));
    const refused = await published(publish, /refused/, n);
    expect(refused).toMatch(/producer firewall: the kernel refused add rule ip denylist pre "bad-rule": ENOENT/);
    expect(ns.nft('list', 'set', 'ip', 'denylist', 'deny')).toMatch(/192\.168\.50\.101/); // previous version intact

    n = publish.stdout.length;
    write('tables: [{ family: ip, name: denylist, chains: [{ name: pre, rules: [{ exprs: [{ type: bogus }] }] }] }]');
    expect(await published(publish, /previous objects stay/, n)).toMatch(/exprs\[0\]\.type: unknown expression "bogus"/);

    n = publish.stdout.length;
    write(objects(['192.168.50.103']));
    await published(publish, /is in the kernel/, n);
    expect(ns.nft('list', 'set', 'ip', 'denylist', 'deny')).toMatch(/elements = \{ 192\.168\.50\.103 \}/);
  });

  test('status shows both producers; a stopped publisher keeps its table until removed', async () => {
    const st = runKpng(['aggregator', 'status', '--aggregator', sock]);
    expect(st.code).toBe(0);
    const producers = JSON.parse(st.stdout) as { name: string; tables: string[]; connected: boolean }[];
    expect(producers.map((p) => [p.name, p.tables, p.connected])).toEqual([['kpng', ['ip kpng', 'ip6 kpng'], true], ['firewall', ['ip denylist'], true]]);
    await publish!.stop();
    await new Promise((r) => setTimeout(r, 200));
    expect(ns.nft('list', 'tables')).toMatch(/table ip denylist/);
    const rm = runKpng(['aggregator', 'remove', 'firewall', '--aggregator', sock]);
    expect(rm).toMatchObject({ code: 0 });
    expect(ns.nft('list', 'tables')).not.toMatch(/denylist/);
    expect(ns.nft('list', 'tables')).toMatch(/table ip kpng/);
    expect(runKpng(['aggregator', 'remove', 'firewall', '--aggregator', sock]).stderr).toMatch(/no producer firewall/);
  });
});

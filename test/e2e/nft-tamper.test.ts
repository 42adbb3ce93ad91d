// Tampering with kpng's nftables table, repaired from the kernel's change notifications rather than
// at the next periodic resync (an hour by default): the netns lab (test/e2e/lab), kpng on n1 with the
// nft backend, a client reaching a node port. For each kind of tampering kpng must log who did what,
// resync, and leave the table as it was, with its own commits never taken for tampering.
// The time from the tampering to kpng's repairing sync is printed (not asserted: tests never time).
import { execFileSync } from 'node:child_process';
import { ADDR, Lab } from './lab/lab';
import { Kpng } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';
import { waitFor, waitForAsync } from '../helpers/wait';
import { parseKlogLine } from '../helpers/klog';

// This file's namespaces and interfaces carry the prefix ktp- (parallel labs on one machine).
process.env.KPNG_LAB_PREFIX = 'ktp';

const d = gated(need.root()).describe;

const services: SvcSpec[] = [
  { name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }], pods: ['p1a', 'p2a'] },
];

d('tampering with kpng\'s table is repaired from nftables notifications', () => {
  let lab: Lab;
  let state: StateFile;
  let kpng: Kpng;
  const repairMs: Record<string, number> = {};

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write(services);
    // The default periodic resync (1 h) stays far away: only the notifications can repair in time.
    kpng = await Kpng.start(lab, state.file, {});
  }, 60000);

  afterAll(async () => {
    // eslint-disable-next-line no-console
    console.log(`time from tampering to kpng's repairing sync: ${Object.entries(repairMs).map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')}`);
    await kpng?.stop();
    await lab?.destroy();
  });

  const nft = (...args: string[]): string => execFileSync('ip', ['netns', 'exec', lab.ns.n1, 'nft', ...args], { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
  const works = async () => (await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30080, 1, 300))[0]!.ok;
  const tampered = () => kpng.log.split('\n').filter((l) => l.includes('changed by another process'));

  /** Milliseconds since midnight UTC of a klog line's time (kpng logs in UTC here, as the test's clock). */
  const lineMs = (line: string): number => {
    const t = parseKlogLine(line)!.time.split(/[:.]/).map(Number);
    return ((t[0]! * 60 + t[1]!) * 60 + t[2]!) * 1000 + t[3]! / 1000;
  };
  const nowMs = () => { const d = new Date(); return ((d.getUTCHours() * 60 + d.getUTCMinutes()) * 60 + d.getUTCSeconds()) * 1000 + d.getUTCMilliseconds(); };

  /**
   * Tampers and waits for kpng's log line about it and the node port; returns that line. The time to
   * repair is from the tampering to kpng's next full sync line (the kernel's answer to the resync).
   */
  async function repairOf(name: string, tamper: () => void): Promise<string> {
    expect(await works()).toBe(true);
    const seen = tampered().length;
    const lines = () => kpng.log.split('\n');
    const before = lines().length;
    const t0 = nowMs();
    tamper();
    await waitFor(`kpng to notice (${name})`, () => tampered().length > seen, 10_000);
    const full = () => lines().slice(before).filter((l) => /nft: revision \d+: full/.test(l));
    await waitFor(`kpng's resync (${name})`, () => full().length > 0, 10_000);
    // The repair works at its first try: kpng knows its table changed, so it does not patch it as if
    // it held what kpng last wrote.
    expect(full()[0]).not.toMatch(/failed/);
    repairMs[name] = lineMs(full()[0]!) - t0;
    await waitForAsync(`the node port again (${name})`, works, 10_000);
    return tampered()[seen]!;
  }

  test('kpng\'s own syncs are not tampering', async () => {
    await waitForAsync('the node port', works, 10_000);
    // An endpoint change: a sync of kpng's own, then nothing to repair.
    state.write([{ ...services[0]!, pods: ['p2a'] }]);
    await waitForAsync('the sync', async () => (await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30080, 3, 300)).every((r) => r.ok && r.name === 'p2a'), 10_000);
    state.write(services);
    await waitForAsync('the sync back', async () => (await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30080, 6, 300)).some((r) => r.name === 'p1a'), 10_000);
    expect(tampered()).toEqual([]);
    expect(kpng.log).not.toMatch(/notifications were lost/);
  });

  test('nft delete table ip kpng', async () => {
    const line = await repairOf('table deleted', () => nft('delete', 'table', 'ip', 'kpng'));
    expect(line).toMatch(/table kpng \(ip\) changed by another process \(pid \d+ nft: .*1 table deleted/);
    expect(nft('list', 'table', 'ip', 'kpng')).toContain('node-ports');
  });

  test('nft flush ruleset', async () => {
    const line = await repairOf('ruleset flushed', () => nft('flush', 'ruleset'));
    expect(line).toMatch(/table kpng \(ip and ip6|ip6 and ip\) changed by another process \(pid \d+ nft: /);
  });

  test('a rule inserted into one of kpng\'s chains', async () => {
    const line = await repairOf('rule inserted', () => nft('insert', 'rule', 'ip', 'kpng', 'nat-prerouting', 'tcp', 'dport', '30080', 'drop'));
    expect(line).toMatch(/1 rule added/);
    expect(nft('list', 'chain', 'ip', 'kpng', 'nat-prerouting')).not.toMatch(/dport 30080 drop/);
  });

  test('an element deleted from kpng\'s node-port map', async () => {
    const line = await repairOf('element deleted', () => nft('delete', 'element', 'ip', 'kpng', 'node-ports', '{', 'tcp', '.', '30080', '}'));
    expect(line).toMatch(/1 element deleted/);
    expect(nft('list', 'map', 'ip', 'kpng', 'node-ports')).toMatch(/tcp \. 30080 :/);
  });

  test('another table changed: no repair', async () => {
    const seen = tampered().length;
    nft('add', 'table', 'ip', 'someone-else');
    nft('add', 'chain', 'ip', 'someone-else', 'c');
    await new Promise((r) => setTimeout(r, 500));
    expect(tampered().length).toBe(seen);
    expect(await works()).toBe(true);
  });
});

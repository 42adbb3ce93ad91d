// kpng started the way a kube-proxy DaemonSet starts it, inside a network namespace: with kubeadm's
// kube-proxy ConfigMap (kube-proxy's defaults: nftables programmed, clusterCIDR, conntrack timeouts,
// oom_score_adj), and with deploy/overlays/nft's container arguments and ConfigMap (its bind addresses, mode
// and sync periods). The file source stands in for the API server, which a namespace cannot reach.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { KpngProcess, ROOT } from '../helpers/cli';
import { containerArgs, renderOverlay } from '../helpers/deploy';
import { Netns } from '../helpers/netns';
import { ep, node, slice, svc } from '../helpers/k8s';
import { waitFor } from '../helpers/wait';
import { gated, need } from '../helpers/gate';

const maybe = gated(need.netns()).test;
const STATE = stringify({ apiVersion: 'v1', kind: 'List', items: [
  node('n1'), svc('web', { clusterIPs: ['10.96.7.7'] }), slice('web-1', 'web', [ep('10.244.1.7', { node: 'n1', ready: true })]),
] });

async function inNs(ns: Netns, url: string): Promise<{ status: number; text: string }> {
  const script = `fetch(${JSON.stringify(url)}).then(async (r) => console.log(JSON.stringify({ status: r.status, text: await r.text() })), (e) => console.log(JSON.stringify({ status: 0, text: String(e.cause?.code ?? e) })))`;
  return JSON.parse(ns.exec(process.execPath, ['-e', script]));
}

/** Polls `url` until it answers 200 (and its body satisfies `ready`, when given). */
async function until(ns: Netns, url: string, p: KpngProcess, ready: (text: string) => boolean = () => true): Promise<{ status: number; text: string }> {
  const t0 = Date.now();
  for (;;) {
    const r = await inNs(ns, url);
    if (r.status === 200 && ready(r.text)) return r;
    if (Date.now() - t0 > 15000) throw new Error(`${url}: ${JSON.stringify(r)}\n${p.text('stderr')}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** The node process under `ip netns exec` (which may fork): the descendant running kpng's main.js. */
function kpngPid(pid: number): number {
  if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main.js')) return pid;
  for (const c of fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) {
    const found = kpngPid(Number(c));
    if (found) return found;
  }
  return 0;
}

function canLowerOomScore(): boolean {
  return spawnSync('sh', ['-c', 'echo -1 > /proc/self/oom_score_adj']).status === 0;
}

function setup(prefix: string) {
  const ns = new Netns(prefix);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  fs.writeFileSync(path.join(dir, 'state.yaml'), STATE);
  return { ns, dir, state: path.join(dir, 'state.yaml') };
}

maybe('kubeadm\'s kube-proxy configuration: nftables, clusterCIDR, conntrack and oom defaults, kube-proxy\'s ports', async () => {
  const { ns, dir, state } = setup('kbo-cfg');
  let p: KpngProcess | undefined;
  try {
    ns.exec('ip', ['addr', 'add', '192.168.50.1/24', 'dev', 'lo']);
    const before = ns.exec('cat', ['/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established']).trim();
    expect(before).not.toBe('86400');
    // kube-proxy's flags only, kube-proxy's default ports: metrics 127.0.0.1:10249, healthz 0.0.0.0:10256.
    p = new KpngProcess(['--config', path.join(ROOT, 'test/ops/fixtures/kubeadm-kube-proxy.yaml'), '--hostname-override=N1', 'file', '--input', state,
      '--metrics-bind-address', '127.0.0.1:10249', '--healthz-bind-address', '0.0.0.0:10256'], { prefix: ['ip', 'netns', 'exec', ns.name] });
    // The metrics server answers before the first sync is done: wait for the sync to be recorded.
    const synced = 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}';
    const metrics = await until(ns, 'http://127.0.0.1:10249/metrics', p, (t) => t.includes(synced));
    // The probes above run synchronously: give the event loop a turn to read kpng's stderr.
    await waitFor('kpng\'s start-up log', () => /metrics: serving on/.test(p!.text('stderr')));
    expect(metrics.text).toContain(synced);
    expect((await until(ns, 'http://192.168.50.1:10256/healthz', p)).text).toContain('"nodeEligible":true');
    expect((await inNs(ns, 'http://127.0.0.1:10249/proxyMode')).text).toBe('nftables');
    await waitFor('the nft table', () => { try { return ns.nft('list', 'table', 'ip', 'kpng').includes('10.96.7.7'); } catch { return false; } });
    // clusterCIDR from the file: the pod client class.
    expect(ns.nft('list', 'table', 'ip', 'kpng')).toContain('10.244.0.0/16');
    // kube-proxy's conntrack default (24h), written in this namespace.
    expect(ns.exec('cat', ['/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established']).trim()).toBe('86400');
    // kube-proxy's oom_score_adj default (-999). Some sandboxes refuse any lowering, even to root: there
    // kpng must say so.
    if (canLowerOomScore()) expect(fs.readFileSync(`/proc/${kpngPid(p.child.pid!)}/oom_score_adj`, 'utf8').trim()).toBe('-999');
    else expect(p.text('stderr')).toMatch(/cannot set oom_score_adj to -999/);
    // kubeadm writes every field, zeros included: nothing to warn about but the flags the file overrides.
    expect(p.text('stderr')).not.toMatch(/no effect in kpng|unknown field/);
    expect(p.text('stderr')).toMatch(/ignores the flags --metrics-bind-address, --healthz-bind-address/);
  } finally {
    await p?.stop();
    ns.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

maybe('deploy/overlays/nft: the container\'s arguments and the ConfigMap, as the DaemonSet runs them', async () => {
  const { ns, dir, state } = setup('kbo-ds');
  let p: KpngProcess | undefined;
  try {
    ns.exec('ip', ['addr', 'add', '192.168.50.1/24', 'dev', 'lo']);
    const rendered = renderOverlay('nft');
    const cm = rendered.configMap;
    // The ConfigMap volume: its keys become files (here in a directory of the test's).
    const args = containerArgs(rendered, path.join(dir, 'config'), 'n1');
    // The DaemonSet's own arguments, then the file source instead of the API server. The test harness
    // puts kpng's servers on free loopback ports unless a test names them: name the ConfigMap's.
    const cfg = (parseAllDocuments(cm.data['config.conf'])[0].toJS()) as Record<string, string>;
    p = new KpngProcess([...args, 'file', '--input', state, '--metrics-bind-address', cfg.metricsBindAddress, '--healthz-bind-address', cfg.healthzBindAddress,
      '--oom-score-adj', '500'], { prefix: ['ip', 'netns', 'exec', ns.name] });
    expect(cfg.metricsBindAddress).toBe('0.0.0.0:10249');
    const hz = await until(ns, 'http://192.168.50.1:10256/healthz', p);
    await waitFor('kpng\'s start-up log', () => /metrics: serving on/.test(p!.text('stderr')));
    expect(JSON.parse(hz.text)).toMatchObject({ healthy: true, nodeEligible: true });
    expect((await until(ns, 'http://192.168.50.1:10256/livez', p)).status).toBe(200);
    expect((await until(ns, 'http://192.168.50.1:10249/metrics', p)).text).toContain('kpng_build_info');
    expect((await inNs(ns, 'http://192.168.50.1:10249/proxyMode')).text).toBe('nftables');
    await waitFor('the nft table', () => { try { return ns.nft('list', 'table', 'ip', 'kpng').includes('10.96.7.7'); } catch { return false; } });
    // The file wins over a flag of the same setting, as in kube-proxy (the ConfigMap leaves oomScoreAdj
    // at kube-proxy's -999), and the flag is named in a warning.
    expect(p.text('stderr')).toMatch(/ignores the flags --metrics-bind-address, --healthz-bind-address, --oom-score-adj/);
    if (canLowerOomScore()) expect(fs.readFileSync(`/proc/${kpngPid(p.child.pid!)}/oom_score_adj`, 'utf8').trim()).toBe('-999');
    // The ConfigMap's conntrack section is kube-proxy's defaults, applied where /proc/sys is writable
    // (root in this namespace; in the DaemonSet, its privileged init container: deploy-privileges.test.ts),
    // and no unsupported or unknown field.
    expect(p.text('stderr')).toMatch(/conntrack: set \/proc\/sys\/net\/netfilter\/nf_conntrack_tcp_timeout_established = 86400/);
    expect(p.text('stderr')).not.toMatch(/no effect in kpng|unknown field/);
  } finally {
    await p?.stop();
    ns.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

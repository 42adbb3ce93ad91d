// Health-check node ports with the real kpng (nft backend) inside a network namespace: a LoadBalancer
// service with externalTrafficPolicy Local gets an HTTP server on its healthCheckNodePort, on the node's
// address, answering 200 while this node has a local ready endpoint and 503 when it has none; the port
// closes when the service goes away.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { KpngProcess } from '../helpers/cli';
import { Netns } from '../helpers/netns';
import { ep, node, slice, svc } from '../helpers/k8s';
import { waitFor } from '../helpers/wait';
import { gated, need } from '../helpers/gate';

const maybe = gated(need.netns()).test;
const NODE_IP = '192.168.50.1';
const HCNP = 31555;

function state(endpointNode: string | null): string {
  const lb = svc('lb', {
    type: 'LoadBalancer', etp: 'Local', clusterIPs: ['10.96.0.50'], lbIPs: ['203.0.113.50'],
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30050 }], extraSpec: { healthCheckNodePort: HCNP },
  });
  const objs = [node('n1'), node('n2', undefined, { addresses: [{ type: 'InternalIP', address: '192.168.50.2' }] })];
  if (endpointNode) objs.push(lb, slice('lb-1', 'lb', [ep('10.244.1.5', { node: endpointNode, ready: true }), ep('10.244.2.5', { node: 'n2', ready: true })], { ports: [{ name: 'http', protocol: 'TCP', port: 8080 }] }));
  return stringify({ apiVersion: 'v1', kind: 'List', items: objs });
}

/** GET from inside the namespace: status, weight header and body, or the connection error. */
function probe(ns: Netns, url: string): { status?: number; weight?: string | null; body?: unknown; error?: string } {
  const script = `fetch(${JSON.stringify(url)}).then(async (r) => console.log(JSON.stringify({ status: r.status, weight: r.headers.get('x-load-balancing-endpoint-weight'), body: JSON.parse(await r.text()) })), (e) => console.log(JSON.stringify({ error: String(e.cause?.code ?? e) })))`;
  return JSON.parse(ns.exec(process.execPath, ['-e', script]));
}

maybe('healthCheckNodePort answers 200/503 as local endpoints come and go, and closes with the service', async () => {
  const ns = new Netns('kbo-hc');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kbo-hc-'));
  const file = path.join(dir, 'state.yaml');
  const write = (text: string) => { fs.writeFileSync(file + '.tmp', text); fs.renameSync(file + '.tmp', file); };
  let p: KpngProcess | undefined;
  try {
    ns.exec('ip', ['addr', 'add', `${NODE_IP}/24`, 'dev', 'lo']);
    write(state('n1'));
    p = new KpngProcess(['file', '--input', file, '--node', 'n1', '--to', 'nft', '--min-sync-period', '0', '--log-level', 'debug'], { prefix: ['ip', 'netns', 'exec', ns.name] });
    const url = `http://${NODE_IP}:${HCNP}/`;
    const until = async (what: string, ok: (r: ReturnType<typeof probe>) => boolean) => {
      const t0 = Date.now();
      let r = probe(ns, url);
      while (!ok(r)) {
        if (Date.now() - t0 > 15000) throw new Error(`timed out waiting for ${what}; last answer ${JSON.stringify(r)}\nkpng stderr:\n${p!.text('stderr')}`);
        await new Promise((res) => setTimeout(res, 100));
        r = probe(ns, url);
      }
      return r;
    };

    const up = await until('200', (r) => r.status === 200);
    expect(up).toEqual({ status: 200, weight: '1', body: { service: { namespace: 'default', name: 'lb' }, localEndpoints: 1, serviceProxyHealthy: true } });
    const opened = new RegExp(`health check: default/lb on port ${HCNP} \\(${NODE_IP.replace(/\./g, '\\.')}:${HCNP}[,)]`);
    await waitFor('the log line of the opened port', () => opened.test(p!.text('stderr')));
    // kpng programmed the kernel for the same service (the health check follows what was applied).
    expect(ns.nft('list', 'table', 'ip', 'kpng')).toContain('10.96.0.50');

    write(state('n2'));
    const down = await until('503', (r) => r.status === 503);
    expect(down).toEqual({ status: 503, weight: '0', body: { service: { namespace: 'default', name: 'lb' }, localEndpoints: 0, serviceProxyHealthy: true } });

    write(state('n1'));
    await until('200 again', (r) => r.status === 200);

    write(state(null));
    // A keep-alive connection may first see the close (UND_ERR_SOCKET); then new connections are refused.
    const gone = await until('the port closed', (r) => r.error === 'ECONNREFUSED');
    expect(gone.error).toBe('ECONNREFUSED');
  } finally {
    await p?.stop();
    ns.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// The same check seen from the host, to be sure the server is inside the namespace only.
maybe('health-check ports are opened in kpng\'s own network namespace only', () => {
  const r = execFileSync('ss', ['-Htln', `sport = :${HCNP}`], { encoding: 'utf8' });
  expect(r.trim()).toBe('');
});

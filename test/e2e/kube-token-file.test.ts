// client-go's kubeconfig `tokenFile` (kubeadm's kube-proxy ConfigMap authenticates this way): kpng reads
// the token from the file, against a real kube-apiserver, and reads it again after it is rotated.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { FileToken, findTokenFile, kubeconfigFiles } from '../../src/source/kube/token-file';
import { startControlPlane, type ControlPlane } from './support/controlplane';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpng-tokenfile-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('tokenFile in a kubeconfig (no API server)', () => {
  test('found for the named user, relative paths against the kubeconfig directory', () => {
    const kc = path.join(dir, 'a.yaml');
    fs.writeFileSync(kc, 'users:\n- name: other\n  user: {token: x}\n- name: proxy\n  user: {tokenFile: secrets/token}\n');
    expect(findTokenFile([kc], 'proxy')).toBe(path.join(dir, 'secrets/token'));
    expect(findTokenFile([kc], 'other')).toBeUndefined();
    expect(findTokenFile([path.join(dir, 'missing.yaml'), kc], 'proxy')).toBe(path.join(dir, 'secrets/token'));
    expect(kubeconfigFiles(undefined, { KUBECONFIG: `/a${path.delimiter}/b` })).toEqual(['/a', '/b']);
    expect(kubeconfigFiles('/x', { KUBECONFIG: '/a' })).toEqual(['/x']);
  });

  test('read again once a minute old; the last token serves while the file is briefly missing', () => {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, 'one\n');
    let now = 0;
    const t = new FileToken(file, () => now);
    expect(t.get()).toBe('one');
    fs.writeFileSync(file, 'two');
    now = 59_000;
    expect(t.get()).toBe('one');
    now = 60_000;
    expect(t.get()).toBe('two');
    fs.rmSync(file);
    now = 200_000;
    expect(t.get()).toBe('two');
    expect(() => new FileToken(file).get()).toThrow(`kubeconfig tokenFile ${file}: ENOENT`);
    fs.writeFileSync(file, '  \n');
    expect(() => new FileToken(file).get()).toThrow(`kubeconfig tokenFile ${file} is empty`);
  });
});

describe('tokenFile against a real kube-apiserver', () => {
  let cp: ControlPlane;
  beforeAll(async () => {
    cp = await startControlPlane();
  }, 120_000);
  afterAll(async () => cp?.stop());

  // In a child Node (jest's module runtime has no module hooks, which the kubeconfig loader uses), from
  // the build: the status of one list of services, and the target's description.
  const listServices = (kubeconfig: string): { status: number; describe: string } => {
    const script = `
      const { loadKubeTarget } = require(${JSON.stringify(path.resolve(__dirname, '../../dist/src/source/kube/config.js'))});
      const { readBody } = require(${JSON.stringify(path.resolve(__dirname, '../../dist/src/source/kube/http.js'))});
      const t = loadKubeTarget(process.argv[1]);
      t.transport.get('/api/v1/services?limit=1', AbortSignal.timeout(10000)).then(async (res) => {
        await readBody(res);
        process.stdout.write(JSON.stringify({ status: res.statusCode, describe: t.describe }));
      });`;
    return JSON.parse(execFileSync(process.execPath, ['-e', script, kubeconfig], { encoding: 'utf8' }));
  };

  test('the token comes from the file (a wrong one is refused, the right one lists services)', async () => {
    const tokenFile = path.join(dir, 'sa-token');
    const kubeconfig = path.join(dir, 'kubeconfig.yaml');
    fs.writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') } }],
      users: [{ name: 'proxy', user: { tokenFile } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'proxy' } }],
      'current-context': 'c',
    }));
    fs.writeFileSync(tokenFile, 'not-a-valid-token\n');
    expect(listServices(kubeconfig).status).toBe(401);
    fs.writeFileSync(tokenFile, `${cp.token}\n`);
    expect(listServices(kubeconfig)).toEqual({ status: 200, describe: `context c, cluster c, user proxy, token from ${tokenFile}` });
  });
});

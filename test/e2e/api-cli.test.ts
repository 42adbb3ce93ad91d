// The acceptance test of the Watch API with the built CLI: the routes view read over the API
// (`kpng local --api ... --to routes`) is the in-process one (`kpng file --node ...`), for each
// node; a client follows a server restart (clean or killed) and sees the new state.
//
// Uses the build in dist/ (`npm run build`; `make test` does it).
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { waitFor as waitUntil } from '../helpers/wait';
import { withTestServers } from '../helpers/cli';

const root = path.resolve(__dirname, '../..');
const node = process.execPath;
const dist = path.join(root, 'dist');
const cli = () => path.join(dist, 'src', 'cli', 'main.js');
const cluster = path.join(root, 'examples', 'cluster.yaml');
let dir: string;
const children: ChildProcessWithoutNullStreams[] = [];

beforeAll(() => {
  if (!existsSync(cli())) throw new Error(`${cli()} is missing: run 'npm run build' (or 'make test')`);
});

beforeEach(() => { dir = mkdtempSync(path.join(os.tmpdir(), 'kpng-api-e2e-')); });
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function run(args: string[]): string {
  return execFileSync(node, [cli(), ...args], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30000 });
}

/** Starts a long-running kpng; resolves once its stderr says `ready`. */
async function start(args: string[], ready: RegExp): Promise<{ child: ChildProcessWithoutNullStreams; out: () => string; err: () => string }> {
  const child = spawn(node, [cli(), ...withTestServers(args)], { cwd: root });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d) => { err += d; if (ready.test(err)) resolve(); });
    child.once('exit', (code) => reject(new Error(`kpng ${args.join(' ')} exited with ${code}: ${err}`)));
  });
  return { child, out: () => out, err: () => err };
}

const waitFor = (what: string, f: () => boolean, ms = 15000) => waitUntil(what, f, ms);

const stop = (c: ChildProcessWithoutNullStreams, sig: NodeJS.Signals = 'SIGTERM') => new Promise<number | null>((r) => { c.once('exit', (code) => r(code)); c.kill(sig); });

test('routes over the API equal the in-process routes, for every node', async () => {
  const sock = path.join(dir, 'x.sock');
  const server = await start(['file', '--input', cluster, '--to', 'api', '--listen', `unix://${sock}`], /serving the ENLS on unix:/);
  expect(statSync(sock).mode & 0o777).toBe(0o600);
  for (const n of ['n1', 'n2', 'no-such-node']) {
    const viaApi = run(['local', '--api', `unix://${sock}`, '--node', n, '--to', 'routes', '--format', 'jsonl', '--once']);
    const inProcess = run(['file', '--input', cluster, '--node', n, '--once', '--to', 'routes', '--format', 'jsonl']);
    if (n === 'no-such-node') {
      expect(viaApi).toBe(''); // an unknown node gets an empty state
    } else {
      expect(viaApi.length).toBeGreaterThan(0);
      expect(viaApi).toBe(inProcess);
    }
  }
  // The dump carries the same items too.
  const dumpApi = JSON.parse(run(['local', '--api', `unix://${sock}`, '--node', 'n1', '--to', 'dump', '--once']));
  const dumpFile = JSON.parse(run(['file', '--input', cluster, '--node', 'n1', '--to', 'dump', '--once']));
  expect(dumpApi.items).toEqual(dumpFile.items);
  expect(await stop(server.child)).toBe(0);
  expect(existsSync(sock)).toBe(false);
});

test('a client follows a clean restart and a killed server (stale socket) and sees the new state', async () => {
  const sock = path.join(dir, 'kpng.sock');
  const input = path.join(dir, 'cluster.yaml');
  writeFileSync(input, readFileSync(cluster, 'utf8'));
  const serve = () => start(['file', '--input', input, '--to', 'api', '--listen', `unix://${sock}`], /serving the ENLS on unix:/);
  let server = await serve();
  const client = await start(['local', '--api', `unix://${sock}`, '--node', 'n1', '--to', 'trace', '--min-sync-period', '0'], /following node n1/);
  await waitFor('the first sync', () => /sync rev=/.test(client.out()));
  expect(client.out()).toMatch(/^reset\n/);

  // Clean restart with a changed input: the client reconnects and sees only the change.
  expect(await stop(server.child)).toBe(0);
  await waitFor('the client noticing', () => /lost the stream/.test(client.err()));
  writeFileSync(input, readFileSync(cluster, 'utf8').replace(/10\.96\.0\.10\b/g, '10.96.0.111'));
  const before = client.out().length;
  server = await serve();
  await waitFor('the change after the restart', () => client.out().length > before && /sync rev=/.test(client.out().slice(before)));
  const after = client.out().slice(before);
  expect(after).toMatch(/^set svc\/default\/web /m);
  expect(after).not.toMatch(/^reset/m); // the store absorbed the server's Reset: only the difference shows
  expect(after.trim().split('\n')).toHaveLength(2);

  // Killed server: its socket stays behind; a new server replaces it and the client is back.
  await stop(server.child, 'SIGKILL');
  expect(statSync(sock).isSocket()).toBe(true);
  writeFileSync(input, readFileSync(cluster, 'utf8'));
  const before2 = client.out().length;
  server = await serve();
  expect(server.err()).toMatch(/removing the stale socket/);
  await waitFor('the state after the kill', () => /sync rev=/.test(client.out().slice(before2)));
  expect(client.out().slice(before2)).toMatch(/^set svc\/default\/web /m);
  await stop(client.child);
  await stop(server.child);
});

test('the CLI refuses TCP without TLS, with a clear error', () => {
  let err = '';
  try {
    run(['file', '--input', cluster, '--to', 'api', '--listen', 'tcp://127.0.0.1:0']);
  } catch (e) {
    err = String((e as { stderr: string }).stderr);
  }
  expect(err).toMatch(/refusing to serve the API on tcp:\/\/127\.0\.0\.1:0 without TLS/);
});

test('the example backend prints the state of a node from a file and over the API', async () => {
  const example = path.join(dist, 'examples', 'print-backend.js');
  const fromFile = execFileSync(node, [example, '--file', cluster, '--node', 'n2', '--once'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(fromFile).toMatch(/^--- full state/);
  expect(fromFile).toMatch(/\+ default\/web 10\.96\.0\.10 80\/TCP cluster-ip: cluster\[10\.244\.1\.5:8080,10\.244\.2\.7:8080\]/);
  expect(fromFile).toMatch(/shop\/front .* lb-ip: pod:local\[10\.244\.2\.20:8443\] node:cluster\[10\.244\.1\.20:8443,10\.244\.2\.20:8443\]\+masq other:local\[10\.244\.2\.20:8443\]/);
  const sock = path.join(dir, 'p.sock');
  const server = await start(['file', '--input', cluster, '--to', 'api', '--listen', `unix://${sock}`], /serving the ENLS on unix:/);
  const overApi = execFileSync(node, [example, '--api', `unix://${sock}`, '--node', 'n2', '--once'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(overApi).toBe(fromFile);
  await stop(server.child);
});

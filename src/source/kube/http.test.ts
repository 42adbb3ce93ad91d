// The transport's RequestObserver against a plain HTTP server on loopback: every request's outcome is
// reported (status, or '<error>' without a response), and the time of every request but watches.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTransport, readBody, type RequestObserver } from './http';

function recorder() {
  const results: string[] = [];
  const latencies: string[] = [];
  const obs: RequestObserver = {
    result: (code, method, host) => results.push(`${code} ${method} ${host}`),
    latency: (verb, host, seconds) => { expect(seconds).toBeGreaterThanOrEqual(0); latencies.push(`${verb} ${host}`); },
  };
  return { obs, results, latencies };
}

test('lists, errors and watches are counted; all but watches are timed once their body is read', async () => {
  const server = http.createServer((req, res) => {
    if (req.url!.startsWith('/api/v1/services?watch=1')) { res.writeHead(200, { 'Content-Type': 'application/json' }); res.end('{"type":"BOOKMARK"}\n'); return; }
    if (req.url!.startsWith('/api/v1/services')) { res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"items":[]}'); return; }
    res.writeHead(404).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { obs, results, latencies } = recorder();
  const t = createTransport(`http://${host}`, async () => {}, 'test', obs);
  const signal = new AbortController().signal;
  try {
    const list = await t.get('/api/v1/services?limit=500', signal);
    // Counted at the headers; timed only once the body has been read.
    expect(results).toEqual([`200 GET ${host}`]);
    expect(latencies).toEqual([]);
    await readBody(list);
    await new Promise((r) => setImmediate(r));
    expect(latencies).toEqual([`GET ${host}`]);

    await readBody(await t.get('/api/v1/services?watch=1&resourceVersion=5', signal));
    await readBody(await t.get('/nope', signal));
    await new Promise((r) => setImmediate(r));
    expect(results).toEqual([`200 GET ${host}`, `200 GET ${host}`, `404 GET ${host}`]);
    expect(latencies).toEqual([`GET ${host}`, `GET ${host}`]);
  } finally {
    await new Promise((r) => server.close(r));
  }
  // No server any more: no response, '<error>', as client-go labels it.
  await expect(t.get('/api/v1/nodes', signal)).rejects.toThrow(/ECONNREFUSED|socket hang up/);
  expect(results.at(-1)).toBe(`<error> GET ${host}`);
  expect(latencies).toHaveLength(3);
});

test('the host label is the server URL\'s host:port, without its userinfo or path', async () => {
  const { obs, results } = recorder();
  // Nothing listens on port 1; the URL's userinfo and path prefix are not part of the host.
  const t = createTransport('http://user@127.0.0.1:1/prefix', async () => {}, 'test', obs);
  await expect(t.get('/api/v1/nodes', new AbortController().signal)).rejects.toThrow();
  expect(results).toEqual(['<error> GET 127.0.0.1:1']);
});

import http from 'node:http';
import { closeServer, listenLikeKubeProxy, RetryingServer } from './http-serve';
import type { Logger } from './log';

const get = (host: string, port: number): Promise<string> => new Promise((resolve, reject) => {
  http.get({ host, port, path: '/', timeout: 2000 }, (res) => {
    let body = '';
    res.on('data', (c) => (body += c));
    res.on('end', () => resolve(body));
  }).on('error', reject);
});

const answering = () => http.createServer((req, res) => res.end(`hello from ${req.socket.localAddress}`));

function recorder(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const put = (m: string) => { lines.push(m); };
  return { lines, info: put, warn: put, error: put, debug: put };
}

test('0.0.0.0 serves both families, as kube-proxy (Go) does: the kubelet probes IPv6 nodes on their IPv6 address', async () => {
  const log = recorder();
  const s = new RetryingServer('healthz', answering(), { host: '0.0.0.0', port: 0 }, log);
  await s.start(true);
  try {
    const port = s.bound!.port;
    expect(await get('127.0.0.1', port)).toMatch(/^hello from/);
    expect(await get('::1', port)).toBe('hello from ::1');
    expect(log.lines.join('\n')).toMatch(/healthz: serving on http:\/\/\[::\]:\d+ \(every IPv4 and IPv6 address\)/);
  } finally {
    await s.stop();
  }
});

test('an address of one family serves that family only', async () => {
  const server = answering();
  const bound = await listenLikeKubeProxy(server, { host: '127.0.0.1', port: 0 });
  try {
    expect(bound.host).toBe('127.0.0.1');
    expect(await get('127.0.0.1', bound.port)).toBe('hello from 127.0.0.1');
    await expect(get('::1', bound.port)).rejects.toThrow(/ECONNREFUSED/);
  } finally {
    await closeServer(server);
  }
});

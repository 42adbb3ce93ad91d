// API addresses: `unix:///absolute/path.sock` (the default, local only) or `tcp://HOST:PORT`
// (TLS only). The gRPC target string for each.
export type ApiAddress =
  | { kind: 'unix'; path: string; target: string; text: string }
  | { kind: 'tcp'; host: string; port: number; target: string; text: string };

/** TLS files of a TCP API endpoint (server: cert + key, clients verified with ca; client: the reverse). */
export interface TlsFiles { tlsCert?: string; tlsKey?: string; tlsCA?: string }

export const DEFAULT_API = 'unix:///run/kpng/kpng.sock';

export class AddressError extends Error {}

/** Parses an API URL; `allowPortZero` for servers (bind any free port). */
export function parseApiAddress(url: string, allowPortZero = false): ApiAddress {
  if (url.startsWith('unix://')) {
    const path = url.slice('unix://'.length);
    if (!path.startsWith('/')) throw new AddressError(`${url}: a unix socket address needs an absolute path (unix:///run/kpng/kpng.sock)`);
    if (Buffer.byteLength(path) > 107) throw new AddressError(`${url}: the socket path is longer than the 107 bytes a unix socket allows`);
    return { kind: 'unix', path, target: `unix://${path}`, text: `unix://${path}` };
  }
  if (url.startsWith('tcp://')) {
    const rest = url.slice('tcp://'.length).replace(/\/$/, '');
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]/]+)):(\d{1,5})$/.exec(rest);
    if (!m) throw new AddressError(`${url}: expected tcp://HOST:PORT (tcp://[::1]:PORT for IPv6)`);
    const host = m[1] ?? m[2];
    const port = Number(m[3]);
    if (port > 65535 || (port === 0 && !allowPortZero)) throw new AddressError(`${url}: bad port ${m[3]}`);
    const hostPart = host.includes(':') ? `[${host}]` : host;
    return { kind: 'tcp', host, port, target: `${hostPart}:${port}`, text: `tcp://${hostPart}:${port}` };
  }
  throw new AddressError(`${url}: expected unix:///PATH or tcp://HOST:PORT`);
}

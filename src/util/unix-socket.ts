// Serving on a unix socket safely: the socket is created in a private (0700) directory,
// given its mode (0600, or 0660 and a group) and only then renamed into place, so nobody can
// connect through a window with looser permissions. A stale socket left by a dead server is
// removed; a live one (another server) or a file that is not a socket is left alone.
import { promises as fsp, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from './log';

/** A group name (from /etc/group) or a numeric gid, to a gid. */
export function resolveGroup(group: string, groupFile = '/etc/group'): number {
  if (/^\d+$/.test(group)) return Number(group);
  let text = '';
  try { text = readFileSync(groupFile, 'utf8'); } catch { /* no group file: only numeric gids */ }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  throw new Error(`--socket-group ${group}: no such group (give a name from ${groupFile} or a numeric gid)`);
}

/** Is something accepting connections on this unix socket? */
function probe(socketPath: string): Promise<'live' | 'stale'> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath);
    s.once('connect', () => { s.destroy(); resolve('live'); });
    s.once('error', (e: NodeJS.ErrnoException) => {
      s.destroy();
      if (e.code === 'ECONNREFUSED' || e.code === 'ENOENT') resolve('stale');
      else reject(new Error(`cannot check ${socketPath}: ${e.message}`));
    });
  });
}

export interface UnixSocketPlan {
  /** Where to bind first (inside a private directory). */
  tmpPath: string;
  /** Gives the socket its mode and group, and moves it into place. Returns a cleanup function. */
  publish(): Promise<() => Promise<void>>;
  /** Undo after a failed bind. */
  abandon(): Promise<void>;
}

export async function prepareUnixSocket(socketPath: string, opts: { group?: string; log: Logger }): Promise<UnixSocketPlan> {
  const gid = opts.group !== undefined ? resolveGroup(opts.group) : undefined;
  const dir = path.dirname(socketPath);
  await fsp.mkdir(dir, { recursive: true, mode: 0o755 });
  const st = await fsp.lstat(socketPath).catch((e: NodeJS.ErrnoException) => { if (e.code === 'ENOENT') return null; throw e; });
  if (st) {
    if (!st.isSocket()) throw new Error(`${socketPath} exists and is not a socket; refusing to replace it`);
    if ((await probe(socketPath)) === 'live') throw new Error(`another server is already listening on ${socketPath}`);
    opts.log.info(`api: removing the stale socket ${socketPath}`);
    await fsp.rm(socketPath, { force: true });
  }
  const tmpDir = await fsp.mkdtemp(path.join(dir, '.kpng-'));
  const tmpPath = path.join(tmpDir, 's');
  if (Buffer.byteLength(tmpPath) > 107) {
    await fsp.rm(tmpDir, { recursive: true, force: true });
    throw new Error(`${socketPath}: the path is too long for a unix socket (a 107-byte limit, with room for a temporary name)`);
  }
  return {
    tmpPath,
    async publish() {
      await fsp.chmod(tmpPath, gid !== undefined ? 0o660 : 0o600);
      if (gid !== undefined) await fsp.chown(tmpPath, process.getuid?.() ?? -1, gid);
      await fsp.rename(tmpPath, socketPath);
      await fsp.rm(tmpDir, { recursive: true, force: true });
      const ino = (await fsp.lstat(socketPath)).ino;
      return async () => {
        // Remove the socket only if it is still ours (a newer server may have replaced it).
        const now = await fsp.lstat(socketPath).catch(() => null);
        if (now && now.ino === ino) await fsp.rm(socketPath, { force: true });
      };
    },
    async abandon() {
      await fsp.rm(tmpDir, { recursive: true, force: true });
    },
  };
}

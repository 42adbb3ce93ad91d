// Who is on the other end of a unix socket connection (SO_PEERCRED through the addon), for logs.
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { loadNative } from './index';

export interface PeerCredentials { pid: number; uid: number; gid: number; /** /proc/PID/comm, when readable. */ command?: string }

/** The credentials of a connected unix socket's peer, or undefined (not a unix socket, no addon). */
export function unixPeerCredentials(socket: Socket): PeerCredentials | undefined {
  // Node keeps the descriptor on the stream handle (libuv pipe); not part of its public API.
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return undefined;
  let c: PeerCredentials;
  try {
    c = loadNative().peerCredentials(fd);
  } catch {
    return undefined;
  }
  try {
    c.command = readFileSync(`/proc/${c.pid}/comm`, 'utf8').trim();
  } catch { /* the peer may already be gone, or in another pid namespace */ }
  return c;
}

/** "pid 123 uid 0 gid 0 (node)". */
export function describePeer(c: PeerCredentials): string {
  return `pid ${c.pid} uid ${c.uid} gid ${c.gid}${c.command ? ` (${c.command})` : ''}`;
}

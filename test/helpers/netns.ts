// Test helpers: throwaway network namespaces (tests only; product code never spawns processes).
import { execFileSync, spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import { loadNative } from '../../src/native';

export function sh(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

export class Netns {
  readonly name: string;
  readonly path: string;
  // KPNG_NETNS_PREFIX: the namespace prefix a test run is allowed to use (shared machines).
  constructor(prefix = process.env.KPNG_NETNS_PREFIX ?? 'kpng-test') {
    this.name = `${prefix}-${crypto.randomBytes(3).toString('hex')}`;
    sh('ip', ['netns', 'add', this.name]);
    this.path = `/var/run/netns/${this.name}`;
    this.exec('ip', ['link', 'set', 'lo', 'up']);
  }
  exec(cmd: string, args: string[], input?: string): string {
    return sh('ip', ['netns', 'exec', this.name, cmd, ...args], input);
  }
  nft(...args: string[]): string { return this.exec('nft', args); }
  ruleset(): string { return this.nft('list', 'ruleset'); }
  destroy(): void {
    // The addon keeps idle nf_tables sockets for reuse; one open in this namespace would keep it alive.
    try { loadNative().nftCloseSockets(); } catch { /* addon not built */ }
    spawnSync('ip', ['netns', 'del', this.name]);
  }
}

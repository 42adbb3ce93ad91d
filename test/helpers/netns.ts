// Test helpers: throwaway network namespaces on the shared lab fixture (test/shared/netlab.ts; tests
// only: product code never spawns processes).
import { execFileSync } from 'node:child_process';
import { loadNative } from '../../src/native';
import { NetLab, nsPath } from '../shared/netlab';

export function sh(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** One throwaway network namespace (loopback up), removed by destroy() or when the process exits. */
export class Netns {
  readonly name: string;
  readonly path: string;
  private readonly lab: NetLab;
  // KPNG_NETNS_PREFIX: the namespace prefix a test run is allowed to use (shared machines); KPNG_LAB_PREFIX,
  // which names every lab's namespaces (test/shared/netlab.ts), wins over both.
  constructor(prefix = process.env.KPNG_NETNS_PREFIX ?? 'kpng-test') {
    this.lab = new NetLab(prefix);
    this.name = this.lab.netns('ns');
    this.path = nsPath(this.name);
  }
  exec(cmd: string, args: string[], input?: string): string {
    return this.lab.exec(this.name, cmd, args, input);
  }
  nft(...args: string[]): string { return this.exec('nft', args); }
  ruleset(): string { return this.nft('list', 'ruleset'); }
  destroy(): void {
    // The addon keeps idle nf_tables sockets for reuse; one open in this namespace would keep it alive.
    try { loadNative().nftCloseSockets(); } catch { /* addon not built */ }
    this.lab.destroy();
  }
}

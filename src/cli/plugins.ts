// The parts of kpng that the CLI loads only when asked for (they pull in gRPC, the kube
// client or the native addon). Each contract is typed here; a missing part is a clear error.
import type { ClusterStore } from '../store/cluster';
import type { ItemStore } from '../store/item-store';
import type { Logger } from '../util/log';
import type { TlsFiles } from '../util/address';
import type { KubeTarget, StartKubeSource } from '../source/kube';
import type { RequestObserver } from '../source/kube/http';

export type { TlsFiles, KubeTarget };

export interface KubeSourceModule {
  startKubeSource: StartKubeSource;
  loadKubeTarget(kubeconfig?: string, userAgent?: string, opts?: { master?: string; observer?: RequestObserver }): KubeTarget;
}

export interface ApiServerModule {
  serveApi(opts: TlsFiles & { store: ClusterStore; log: Logger; listen: string; socketGroup?: string; signal: AbortSignal }): Promise<{ address: string; close(): Promise<void> }>;
}

export interface ApiClientModule {
  /** Follows a node's state from a kpng API server into an ItemStore (synced after the first Sync). */
  startApiSource(opts: TlsFiles & { api: string; node: string; log: Logger; signal: AbortSignal; giveUpAfterFailures?: number; onGiveUp?: (e: Error) => void }): Promise<{ state: ItemStore; stop(): Promise<void> }>;
}

export function loadPlugin<T>(modulePath: string, what: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(modulePath) as T;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'MODULE_NOT_FOUND' && err.message.includes(modulePath.replace(/^\.\.\//, ''))) {
      throw new Error(`${what} is not available in this build (${modulePath} is missing)`);
    }
    throw e;
  }
}

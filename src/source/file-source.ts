// The file source: loads a kubectl-style dump into a ClusterStore and, unless told to stop,
// watches the file and applies changes when it is rewritten or replaced (renamed over).
import { createHash } from 'node:crypto';
import { promises as fsp, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { ClusterStore } from '../store/cluster';
import type { Logger } from '../util/log';
import { parseObjectsText } from './objects-file';

export interface FileSourceOptions {
  file: string;
  store: ClusterStore;
  log: Logger;
  /** Wait this long after a change before reading (writers often write in several steps). */
  debounceMs?: number;
}

export class FileSource {
  private watcher: FSWatcher | null = null;
  private lastHash = '';
  private timer: NodeJS.Timeout | null = null;
  private loading: Promise<void> = Promise.resolve();
  /** Completed loads that changed the file content (for tests and logs). */
  loads = 0;

  constructor(private readonly opts: FileSourceOptions) {}

  /** First load; the store is marked synced once it succeeded. Throws when the file cannot be used. */
  async start(watchFile: boolean): Promise<void> {
    const ok = await this.load(true);
    if (!ok) throw new Error(`cannot use ${this.opts.file} (see the error above)`);
    this.opts.store.markSynced();
    if (watchFile) this.watch();
  }

  stop(): void {
    this.watcher?.close();
    this.watcher = null;
    if (this.timer) clearTimeout(this.timer);
  }

  /** Watching the directory catches both in-place rewrites and a new file renamed over the old. */
  private watch(): void {
    const dir = path.dirname(path.resolve(this.opts.file));
    const base = path.basename(this.opts.file);
    this.watcher = watch(dir, { persistent: true }, (_event, name) => {
      if (name && name.toString() !== base) return;
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => { this.loading = this.loading.then(() => this.load(false).then(() => undefined)); }, this.opts.debounceMs ?? 50);
    });
    this.watcher.on('error', (e) => this.opts.log.error(`watching ${this.opts.file}: ${e.message}`));
  }

  /** Reads and applies the file; on failure the previous state stays. True when the file was usable. */
  async load(first: boolean): Promise<boolean> {
    const { file, store, log } = this.opts;
    let text: string;
    try {
      text = await fsp.readFile(file, 'utf8');
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      // A rename-over makes the file briefly absent: keep the state, the next event reloads.
      if (!first && err.code === 'ENOENT') return false;
      log.error(`cannot read ${file}: ${err.message}`);
      return false;
    }
    const hash = createHash('sha1').update(text).digest('hex');
    if (hash === this.lastHash) return true;
    let objects;
    try {
      objects = parseObjectsText(text);
    } catch (e) {
      log.error(`${file}: ${(e as Error).message}; keeping the previous state`);
      return false;
    }
    this.lastHash = hash;
    for (const note of objects.notes) log.warn(`${file}: ignoring ${note}`);
    store.replace('Node', objects.Node);
    store.replace('Service', objects.Service);
    store.replace('EndpointSlice', objects.EndpointSlice);
    store.flush();
    this.loads++;
    log.debug(`${file}: loaded ${objects.Service.length} services, ${objects.EndpointSlice.length} endpoint slices, ${objects.Node.length} nodes (${objects.ignored} other objects ignored)`);
    return true;
  }
}

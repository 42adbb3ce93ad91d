// client-go's `tokenFile` user field: the bearer token is read from a file, and read again as it
// changes (a projected service-account token is rotated by the kubelet, about hourly). kubeadm's
// kube-proxy kubeconfig authenticates this way. @kubernetes/client-node ignores the field (it reads a
// `token-file` spelling, once), so kpng reads it itself, as client-go does: at most a minute old.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';

const REREAD_MS = 60_000;

/** The kubeconfig files client-node loaded: --kubeconfig, else each of $KUBECONFIG, else ~/.kube/config. */
export function kubeconfigFiles(explicit?: string, env = process.env): string[] {
  if (explicit) return [explicit];
  if (env.KUBECONFIG) return env.KUBECONFIG.split(path.delimiter).filter(Boolean);
  return [path.join(os.homedir(), '.kube', 'config')];
}

/**
 * The `tokenFile` of user `userName` in the first file that names that user, resolved against that
 * file's directory as client-go resolves relative paths; undefined when the user has none.
 */
export function findTokenFile(files: string[], userName: string): string | undefined {
  for (const file of files) {
    let doc: unknown;
    try {
      doc = parse(fs.readFileSync(file, 'utf8'));
    } catch {
      continue; // missing or unreadable: client-node has already said what it makes of it
    }
    const users = (doc as { users?: { name?: string; user?: { tokenFile?: unknown } }[] } | null)?.users;
    const entry = Array.isArray(users) ? users.find((u) => u?.name === userName) : undefined;
    if (!entry) continue;
    const tf = entry.user?.tokenFile;
    return typeof tf === 'string' && tf !== '' ? path.resolve(path.dirname(file), tf) : undefined;
  }
  return undefined;
}

/** A bearer token read from a file, read again when the last read is older than a minute. */
export class FileToken {
  private token = '';
  private readAt = -Infinity;

  constructor(
    readonly file: string,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get(): string {
    const t = this.now();
    if (t - this.readAt >= REREAD_MS || this.token === '') {
      let text: string;
      try {
        text = fs.readFileSync(this.file, 'utf8');
      } catch (e) {
        // A rotation in progress or a volume not mounted yet: the last token still serves until it expires.
        if (this.token) return this.token;
        throw new Error(`kubeconfig tokenFile ${this.file}: ${(e as Error).message}`);
      }
      const token = text.trim();
      if (!token) {
        if (this.token) return this.token;
        throw new Error(`kubeconfig tokenFile ${this.file} is empty`);
      }
      this.token = token;
      this.readAt = t;
    }
    return this.token;
  }
}

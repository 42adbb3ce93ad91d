// Where the API server is and how to authenticate, from a kubeconfig, through
// @kubernetes/client-node: --kubeconfig PATH, else $KUBECONFIG, else ~/.kube/config, else the
// in-cluster service account. The library is ESM-only (2.x); Node >= 22.12 require()s it from
// this CommonJS build (no top-level await in it). Only its config and auth part is loaded
// (client-node.ts).
import { kubeConfigClass } from './client-node';
import { createTransport, type RequestObserver, type Transport } from './http';
import { FileToken, findTokenFile, kubeconfigFiles } from './token-file';

export interface KubeTarget {
  transport: Transport;
  /** "context X, cluster Y, user Z" or "in-cluster" (for the log). */
  describe: string;
}

const FALLBACK_SERVER = 'http://localhost:8080';

/**
 * `master` (kube-proxy's --master) replaces the kubeconfig's server; given alone, as client-go reads it,
 * it is the API server's URL with no credentials (no in-cluster or default kubeconfig). `observer` sees
 * every request the transport makes (kube-proxy's rest_client metrics).
 */
export function loadKubeTarget(kubeconfig?: string, userAgent = 'kpng', opts: { master?: string; observer?: RequestObserver } = {}): KubeTarget {
  const { master, observer } = opts;
  if (master && !kubeconfig) return { transport: createTransport(master, async () => {}, userAgent, observer), describe: '--master without a kubeconfig: no credentials' };
  const KubeConfig = kubeConfigClass();
  const kc = new KubeConfig();
  try {
    if (kubeconfig) kc.loadFromFile(kubeconfig);
    else kc.loadFromDefault();
  } catch (e) {
    // client-node's own errors name neither the file nor what to do (a bare ENOENT, a YAML parser's).
    const err = e as NodeJS.ErrnoException;
    const where = kubeconfig ?? process.env.KUBECONFIG ?? '(default)';
    throw new Error(`kubeconfig ${where}: ${err.code === 'ENOENT' ? 'no such file' : err.code === 'EACCES' ? 'permission denied' : err.message.split('\n')[0]}`);
  }
  const found = kc.getCurrentCluster();
  const cluster = found && master ? { ...found, server: master } : found;
  if (!cluster) {
    throw new Error(`kubeconfig ${kubeconfig ?? '(default)'}: no current cluster (context ${JSON.stringify(kc.getCurrentContext())})`);
  }
  if (!kubeconfig && !master && cluster.server === FALLBACK_SERVER && kc.getCurrentUser()?.name === 'user') {
    throw new Error('no kubeconfig: pass --kubeconfig, set $KUBECONFIG, create ~/.kube/config, or run in a pod (service account)');
  }
  if (cluster.server.startsWith('http:') && !cluster.skipTLSVerify) {
    throw new Error(`cluster ${cluster.name}: plain HTTP (${cluster.server}) needs insecure-skip-tls-verify in the kubeconfig`);
  }
  const context = kc.getCurrentContext();
  const user = kc.getCurrentUser()?.name ?? '-';
  const describe = context === 'inClusterContext' ? 'in-cluster service account' : `context ${context}, cluster ${cluster.name}, user ${user}`;
  // client-go's `tokenFile` (kubeadm's kube-proxy kubeconfig), which client-node does not read.
  const tokenFile = context === 'inClusterContext' ? undefined : findTokenFile(kubeconfigFiles(kubeconfig), user);
  const fileToken = tokenFile ? new FileToken(tokenFile) : undefined;
  const apply = async (o: Parameters<typeof kc.applyToHTTPSOptions>[0]): Promise<void> => {
    await kc.applyToHTTPSOptions(o);
    if (fileToken) o.headers = { ...o.headers, Authorization: `Bearer ${fileToken.get()}` };
  };
  if (fileToken) fileToken.get(); // a missing or empty file is an error at start, naming it
  return {
    transport: createTransport(cluster.server, apply, userAgent, observer),
    describe: `${tokenFile ? `${describe}, token from ${tokenFile}` : describe}${master ? ', server from --master' : ''}`,
  };
}

// Stand-in for @kubernetes/client-node's oidc_auth.js as its config.js imports it (see client-node.ts):
// the real authenticator pulls in openid-client and jose (dozens of modules) for
// kubeconfigs with an `auth-provider: oidc` user, which a node's kube-proxy config never has. It is
// loaded the first time a user with an auth provider is seen.
import * as path from 'node:path';
import { clientNodeDist } from './client-node';

interface Authenticator {
  isAuthProvider(user: unknown): boolean;
  applyAuthentication(user: unknown, opts: unknown): Promise<void>;
}

type OidcModule = { OpenIDConnectAuth: new () => Authenticator };

export class OpenIDConnectAuth implements Authenticator {
  private real?: Authenticator;

  private load(): Authenticator {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (this.real ??= new (require(path.join(clientNodeDist(), 'oidc_auth.js')) as OidcModule).OpenIDConnectAuth());
  }

  /** The real check is `user.authProvider.name === 'oidc'`: no provider, no need to load it. */
  isAuthProvider(user: unknown): boolean {
    if (!(user as { authProvider?: unknown } | undefined)?.authProvider) return false;
    return this.load().isAuthProvider(user);
  }

  applyAuthentication(user: unknown, opts: unknown): Promise<void> {
    return this.load().applyAuthentication(user, opts);
  }
}

// The dummy link that holds service addresses in IPVS mode (kube-ipvs0: upstream's name, and kpng's IPVS
// backend's). Deleting it removes the addresses with it. Only a dummy link of that name is deleted.
import { deleteLink } from '../native/rtnl';
import type { NativeCallOptions } from '../native';
import { errorLine, type CleanupReport } from './report';

export const IPVS_DUMMY_LINK = 'kube-ipvs0';

export async function removeDummyLink(name: string, call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  try {
    const r = await deleteLink(name, { kind: 'dummy' }, call);
    if (r.deleted) return { links: [name] };
    return r.kind ? { notes: [`link ${name} left: it is a ${r.kind} link, not the dummy kube-proxy makes`] } : {};
  } catch (e) {
    return { errors: [errorLine('link', name, e)] };
  }
}

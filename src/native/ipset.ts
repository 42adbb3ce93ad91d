// Typed API of the addon's ipset part (native/ipset.cc, nfnetlink): sets destroyed by name. Only the
// clean-up of upstream kube-proxy's IPVS mode uses it; kpng itself makes no ipset.
import { loadNative } from './index';
import type { NativeCallOptions } from './nft-types';

/** Kernel ipset errno (IPSET_ERR_BUSY in ip_set.h): the set is still referenced, e.g. by an iptables rule. */
export const IPSET_ERR_BUSY = 4100;

export interface IpsetDestroyResult {
  /** Destroyed now. */
  destroyed: string[];
  /** There was no such set. */
  absent: string[];
  /** Refused, with the kernel's errno (IPSET_ERR_BUSY: still referenced). */
  failed: { name: string; errno: number; code: string }[];
  /** The kernel's replies were lost: the outcome of the others is unknown. */
  unknown: boolean;
}

interface RawResult { failed: { index: number; errno: number; code: string }[]; overflow: boolean; incomplete: boolean }
interface IpsetNative { ipsetDestroy(names: string[], netns?: string): Promise<RawResult> }
const addon = () => loadNative() as unknown as IpsetNative;

const ENOENT = 2;

/** Destroys the sets of these names (one message each, no transaction). */
export async function ipsetDestroy(names: string[], call?: NativeCallOptions): Promise<IpsetDestroyResult> {
  for (const n of names) if (!/^[\x21-\x7e]{1,31}$/.test(n)) throw new RangeError(`bad ipset name ${JSON.stringify(n)}`);
  if (names.length === 0) return { destroyed: [], absent: [], failed: [], unknown: false };
  const raw = await addon().ipsetDestroy(names, call?.netns);
  const byIndex = new Map(raw.failed.map((f) => [f.index, f]));
  const out: IpsetDestroyResult = { destroyed: [], absent: [], failed: [], unknown: raw.overflow || raw.incomplete };
  names.forEach((name, i) => {
    const f = byIndex.get(i);
    if (!f) out.destroyed.push(name);
    else if (f.errno === ENOENT) out.absent.push(name);
    else out.failed.push({ name, errno: f.errno, code: f.errno === IPSET_ERR_BUSY ? 'IPSET_ERR_BUSY' : f.code });
  });
  return out;
}

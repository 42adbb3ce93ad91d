// The marker's catch-up in words: per node, how long after `since` its client first got the pod the
// marker Service had just moved to (probes.ts markerSeen).
import { markerSeen, type ProbeEvent } from './probes';
import { secs } from './report';
import type { Flip } from './scenario';

export function catchUp(events: ProbeEvent[], nodes: string[], pod: string, since: number, to: number, what: string): string {
  const parts = nodes.map((n) => {
    const s = markerSeen(events, n, pod, since, to);
    return `${n} ${s === undefined ? 'never' : secs(s)}`;
  });
  return `${what}: ${parts.join(', ')}`;
}

/** When the marker's EndpointSlice followed the flip, in words. */
export async function sliceFollowed(flip: Flip): Promise<string> {
  const at = await flip.sliceAt;
  return `its EndpointSlice followed ${at === undefined ? 'not within 60 s' : `${secs(at - flip.at)} after the change`}`;
}

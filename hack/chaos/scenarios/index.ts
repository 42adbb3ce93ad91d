// Every scenario by name (scenario-list.ts has their order and titles).
import type { Scenario } from '../scenario';
import { apiKill } from './api-kill';
import { apiPartition } from './api-partition';
import { baseline } from './baseline';
import { batchRejected } from './batch-rejected';
import { bpfMapFull } from './bpf-map-full';
import { conntrackFull } from './conntrack-full';
import { etcdCompact } from './etcd-compact';
import { kubeletRestart } from './kubelet-restart';
import { proxyKill } from './proxy-kill';
import { tamperFlush, tamperTable } from './tamper';

export const BY_NAME: Record<string, Scenario> = Object.fromEntries(
  [baseline, apiKill, apiPartition, proxyKill, tamperFlush, tamperTable, etcdCompact, kubeletRestart, conntrackFull, bpfMapFull, batchRejected].map((s) => [s.info.name, s]),
);

// Every scenario by name (scenario-list.ts has their order and titles).
import type { Scenario } from '../scenario';
import { apiKill } from './api-kill';
import { apiPartition } from './api-partition';
import { baseline } from './baseline';
import { etcdCompact } from './etcd-compact';
import { proxyKill } from './proxy-kill';
import { tamperFlush, tamperTable } from './tamper';

export const BY_NAME: Record<string, Scenario> = Object.fromEntries(
  [baseline, apiKill, apiPartition, proxyKill, tamperFlush, tamperTable, etcdCompact].map((s) => [s.info.name, s]),
);

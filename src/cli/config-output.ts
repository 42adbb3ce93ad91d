// What kpng writes instead of running: `--write-config-to FILE`.
import fs from 'node:fs';
import { yaml } from '../util/lazy-yaml';
import type { Logger } from '../util/log';
import type { Obj } from '../config/kube-proxy-schema';

/** Keys in alphabetical order at every depth, as kube-proxy writes its configuration. */
function sorted(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sorted);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted((v as Obj)[k])]));
}

/** --write-config-to: the configuration in effect, as YAML; returns the exit code. */
export function writeConfiguration(file: string, configuration: Obj, log: Logger): number {
  try {
    fs.writeFileSync(file, yaml().stringify(sorted(configuration)));
  } catch (e) {
    log.error(`--write-config-to ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    return 1;
  }
  log.info(`wrote the configuration to ${file}`);
  return 0;
}

// The YAML parser, loaded on first use: `kpng kube` reads no YAML unless given a config file, and
// loading the package costs resident memory (its modules and the node binary pages they touch).
import type * as Yaml from 'yaml';

let mod: typeof Yaml | undefined;

export function yaml(): typeof Yaml {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (mod ??= require('yaml') as typeof Yaml);
}

import { builtinStandIn, builtinStandInSource, defaultOnlyImports } from './esm-builtins';

test('only builtins imported by default alone are served as CommonJS', () => {
  const src = [
    "import fs from 'node:fs';",
    "import https from 'node:https';",
    "import { request } from 'node:https';",
    "import * as os from 'node:os';",
    "import yaml, { load } from 'js-yaml';",
    "  import path from 'path';",
    "const x = 'import tls from \"node:tls\"';",
  ].join('\n');
  expect([...defaultOnlyImports(src)].sort()).toEqual(['node:fs', 'path']);
  expect(builtinStandInSource('kpng-builtin:fs')).toBe('module.exports = require("node:fs");\n');
  expect(builtinStandInSource('file:///x.js')).toBeUndefined();
  // Outside the root, or not a builtin: resolved as usual (the source is not even read).
  expect(builtinStandIn('node:fs', 'file:///elsewhere/a.js', 'file:///root/')).toBeUndefined();
  expect(builtinStandIn('js-yaml', 'file:///root/a.js', 'file:///root/')).toBeUndefined();
});

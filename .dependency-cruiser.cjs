// The layering of src/ (docs/design.md, "Layers"), checked by `make test`: a module imports only from
// its own layer or those below it, and no import circle, type-only imports included.
const LAYERS = [
  ['util', 'gen', 'stats'],
  ['model'],
  ['native', 'sink', 'nft'],
  ['store'],
  ['source', 'aggregator'],
  ['backend', 'runner', 'health'],
  ['api', 'metrics'],
  ['config', 'cleanup'],
  ['cli', 'index'],
];
const folder = (name) => `^src/${name}(/|\\.ts$)`;
const below = (i) => LAYERS.slice(0, i + 1).flat();
const FAKES = '/(fake|faulty)\\.ts$';

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'An import circle: one of its modules holds what the others need.', from: {}, to: { circular: true } },
    ...LAYERS.flatMap((names, i) => names.map((name) => ({
      name: `layer-${name}`,
      severity: 'error',
      comment: `src/${name} may import only from its layer or those below it: ${below(i).join(', ')}`,
      from: { path: folder(name) },
      to: { path: '^src/', pathNot: below(i).map(folder) },
    }))),
    {
      name: 'no-fakes-in-product',
      severity: 'error',
      comment: 'The fakes of the kernel seams (fake.ts, faulty.ts) are for tests and library users (src/index.ts exports them): product code never runs on them.',
      from: { path: '^src/', pathNot: [FAKES, '^src/index\\.ts$'] },
      to: { path: FAKES },
    },
    { name: 'not-in-a-layer', severity: 'error', comment: 'Every folder of src/ is in LAYERS (.dependency-cruiser.cjs).', from: { path: '^src/', pathNot: LAYERS.flat().map(folder) }, to: {} },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.test\\.ts$' },
    doNotFollow: { path: 'node_modules' },
  },
};

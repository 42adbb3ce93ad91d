// Unit tests live beside the code (src/**/*.test.ts) or under test/; e2e tests (real kernel in
// network namespaces, real kube-apiserver) under test/e2e/. All are TypeScript through ts-jest.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // *.guest.test.ts need a kernel with IPVS: hack/qemu/test-guest.sh runs them in a qemu guest.
  testPathIgnorePatterns: ['/node_modules/', '\\.guest\\.test\\.ts$'],
  transform: { '^.+\\.ts$': ['ts-jest', { isolatedModules: true, tsconfig: '<rootDir>/tsconfig.json' }] },
  moduleFileExtensions: ['ts', 'js', 'json', 'node'],
  testTimeout: 60000,
  // e2e suites share the kernel and the control plane: run test files one at a time.
  maxWorkers: 1,
  // A test that fails half-way can leave a client reconnecting: never let that hang CI.
  forceExit: true,
};

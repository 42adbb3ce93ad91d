// Tests that need a kernel with IPVS (this machine's has none): `*.guest.test.ts`, compiled by tsc into
// dist/ and run by hack/qemu/test-guest.sh inside a qemu guest (Debian's 6.1 kernel). Plain JS, no
// transform: compiling TypeScript under an emulated CPU would cost more than the tests.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  rootDir: __dirname,
  roots: ['<rootDir>/dist/src', '<rootDir>/dist/test'],
  testMatch: ['**/*.guest.test.js'],
  moduleFileExtensions: ['js', 'json', 'node'],
  transform: {},
  cacheDirectory: '/tmp/jest-guest-cache',
  testTimeout: 180000,
  maxWorkers: 1,
};

// Whether the tests run under `make test` (KPNG_TEST_STRICT=1), apart from gate.ts: the nft lab's
// kpng runner reads it, and benches import that runner without jest.

/** True under `make test`: a skip that the allow-list does not cover is a failure. */
export function strictTests(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.KPNG_TEST_STRICT === '1';
}

// Polls a condition until it holds, or fails the test naming what it waited for.
export async function waitFor(what: string, f: () => boolean, ms = 10000): Promise<void> {
  const t0 = Date.now();
  while (!f()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** waitFor for a condition that must be awaited (a probe, an HTTP request). */
export async function waitForAsync(what: string, f: () => Promise<boolean>, ms = 10000): Promise<void> {
  const t0 = Date.now();
  while (!(await f())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

// The jest set-up of a describe that runs `kpng --to ebpf` in a lab (test/e2e/ebpf*.test.ts): the lab
// made in beforeAll, and on every path kpng stopped and the lab destroyed, with what it made checked
// gone; kpng's log printed after a test that failed.
import * as fs from 'node:fs';
import type { KpngProcess } from '../shared/kpng-process';

/** A lab: destroy() removes everything it made (namespaces, cgroups, pins, processes). */
export interface EbpfLabLike { destroy(): Promise<void> }

export interface EbpfLabHooks {
  /** Makes the lab and, when the suite starts it now, kpng (the describe keeps both in its own variables). */
  setUp: () => Promise<void>;
  /** The lab and kpng of the moment (a test may have restarted kpng); undefined when not made. */
  lab: () => EbpfLabLike | undefined;
  kpng: () => KpngProcess | undefined;
  /** Paths that must be gone once the lab is destroyed (its pin directory, its cgroups). */
  removed?: () => string[];
}

/** Registers the describe's beforeAll, afterAll and afterEach. */
export function useEbpfLab(h: EbpfLabHooks): void {
  const tearDown = async (): Promise<void> => {
    await h.kpng()?.stop();
    await h.lab()?.destroy();
  };

  beforeAll(async () => {
    try {
      await h.setUp();
    } catch (e) {
      await tearDown();
      throw e;
    }
  }, 60000);

  afterAll(async () => {
    await tearDown();
    if (h.lab()) for (const p of h.removed?.() ?? []) expect(fs.existsSync(p)).toBe(false);
  }, 30000);

  afterEach(() => {
    const s = expect.getState();
    // eslint-disable-next-line no-console
    if (s.assertionCalls !== s.numPassingAsserts) console.log(`kpng log:\n${h.kpng()?.log}`);
  });
}

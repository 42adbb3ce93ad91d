// Gives the event loop a turn during long synchronous work (a full sync of 50k services renders and
// encodes hundreds of thousands of objects): callers `await y.maybe()` between small steps, and it
// yields (setImmediate) once `budgetMs` of work has passed since the last turn.
//
// 5 ms by default: a major GC's pause and the wait for a CPU that comes with it land on top of the
// slice they fall in, so shorter slices give shorter stalls; at 5 ms the full sync's stalls were
// shorter than with 10 ms at the same sync time, and shorter slices gained little more.
//
// With a `signal`, each turn ends by throwing its reason once it aborted: a long piece of work (a
// full sync of a large cluster takes seconds) is abandoned at the next turn when kpng is stopping.
export class Yielder {
  private last = performance.now();
  /** Turns given to the event loop so far. */
  turns = 0;
  constructor(private readonly budgetMs = 5, private readonly signal?: AbortSignal) {}

  /** True when the budget is spent (check it in hot loops; await turn() then). */
  due(): boolean {
    return performance.now() - this.last >= this.budgetMs;
  }

  async maybe(): Promise<void> {
    if (this.due()) await this.turn();
  }

  async turn(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.turns++;
    this.last = performance.now();
    this.signal?.throwIfAborted();
  }
}

// Gives the event loop a turn during long synchronous work (a full sync of 50k services renders and
// encodes hundreds of thousands of objects): callers `await y.maybe()` between small steps, and it
// yields (setImmediate) once `budgetMs` of work has passed since the last turn.
export class Yielder {
  private last = performance.now();
  /** Turns given to the event loop so far. */
  turns = 0;
  constructor(private readonly budgetMs = 10) {}

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
  }
}

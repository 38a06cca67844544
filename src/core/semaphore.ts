/**
 * At most `slots` holders at once; `run` waits its turn: higher `priority` first, first come first
 * served among equals (FIFO when every caller leaves it at 0). A holder is never preempted.
 */
export class Semaphore {
  private active = 0;
  private readonly waiting: { priority: number; go: () => void }[] = [];

  constructor(private readonly slots: number) {}

  async run<T>(work: () => Promise<T>, priority = 0): Promise<T> {
    if (this.active >= this.slots) {
      await new Promise<void>((go) => {
        // After every waiter of this priority or higher: equal priorities keep their order.
        const at = this.waiting.findIndex((w) => w.priority < priority);
        this.waiting.splice(at === -1 ? this.waiting.length : at, 0, { priority, go });
      });
    }
    this.active++;
    try {
      return await work();
    } finally {
      this.active--;
      this.waiting.shift()?.go();
    }
  }

  /** Callers waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }
}

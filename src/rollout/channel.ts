/**
 * A bounded async queue between two stages: `put` waits while it is full, `take` waits while it is
 * empty and returns undefined once the channel is closed and drained. This is how a stage's pool
 * hands work to the next (INIT → READY is bounded: the pre-warmed workspaces).
 */
export class Channel<T> {
  private readonly items: T[] = [];
  private readonly takers: ((item: T | undefined) => void)[] = [];
  private readonly putters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly capacity = Number.POSITIVE_INFINITY) {}

  get size(): number {
    return this.items.length;
  }

  async put(item: T): Promise<void> {
    if (this.closed) throw new Error('put on a closed channel');
    const taker = this.takers.shift();
    if (taker) {
      taker(item);
      return;
    }
    while (this.items.length >= this.capacity) await new Promise<void>((resolve) => this.putters.push(resolve));
    this.items.push(item);
  }

  take(): Promise<T | undefined> {
    const item = this.items.shift();
    if (item !== undefined) {
      this.putters.shift()?.();
      return Promise.resolve(item);
    }
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => this.takers.push(resolve));
  }

  /** No more puts: takers get what is left, then undefined. */
  close(): void {
    this.closed = true;
    for (const taker of this.takers.splice(0)) taker(undefined);
  }
}

/** Runs `workers` loops that each take from `input` until it is closed and drained. */
export async function pool<T>(workers: number, input: Channel<T>, work: (item: T) => Promise<void>): Promise<void> {
  await Promise.all(
    Array.from({ length: Math.max(1, workers) }, async () => {
      for (let item = await input.take(); item !== undefined; item = await input.take()) await work(item);
    }),
  );
}

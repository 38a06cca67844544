/**
 * Writes the provider's keep-alive bytes whenever a stream has been quiet for `intervalMs`, so
 * harness idle watchdogs (Claude Code's byte-idle timer among them) see a live connection while
 * the model is slow. Any real write resets the timer.
 */
export class KeepAlive {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly write: () => void,
  ) {}

  start(): void {
    this.touch();
  }

  touch(): void {
    if (this.intervalMs <= 0) return;
    if (this.timer) {
      this.timer.refresh();
      return;
    }
    this.timer = setInterval(() => this.write(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

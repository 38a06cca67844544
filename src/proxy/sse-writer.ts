import type { ServerResponse } from 'node:http';
import { PolarError } from '../core/errors.js';
import type { SseEvent } from '../core/sse/parse.js';
import { formatSseEvent } from '../core/sse/write.js';

/**
 * A streamed reply's events on their way to the harness, and their text as sent (the reply the
 * call records). Events translated in one turn (an upstream read often carries many) leave in one
 * socket write: the socket is corked at the first and uncorked once the turn's microtasks are done,
 * or by `uncork()` before the database is written (a checkpoint, the final commit), so that what is
 * translated goes out first.
 */
export class SseWriter {
  private readonly sent: string[] = [];
  private corked = false;

  constructor(
    private readonly res: ServerResponse,
    /** Called on every write that sends something (the keep-alive timer restarts). */
    private readonly onSend: () => void,
  ) {}

  /** Resolves once the socket takes more; rejects with POLAR_CLIENT_ABORTED if the harness left. */
  async write(events: SseEvent[]): Promise<void> {
    if (events.length === 0) return;
    const text = events.length === 1 ? formatSseEvent(events[0]!) : events.map(formatSseEvent).join('');
    this.sent.push(text);
    this.onSend();
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      process.nextTick(this.uncork);
    }
    if (!this.res.write(text)) await drained(this.res);
  }

  readonly uncork = (): void => {
    if (!this.corked) return;
    this.corked = false;
    this.res.uncork();
  };

  /** Everything written so far. */
  text(): string {
    return this.sent.join('');
  }
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    const onDrain = () => {
      res.off('close', onClose);
      resolve();
    };
    const onClose = () => {
      res.off('drain', onDrain);
      reject(new PolarError('POLAR_CLIENT_ABORTED', 'harness disconnected', 499));
    };
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

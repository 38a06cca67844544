import type { ServerResponse } from 'node:http';
import { PolarError } from '../core/errors.js';
import type { SseEvent } from '../core/sse/parse.js';
import { formatSseEvent } from '../core/sse/write.js';

/**
 * A streamed reply's events on their way to the harness, and their text as sent (the reply the
 * call records). Events translated in one turn (an upstream read often carries many) leave in one
 * `res.write`, made once the turn's microtasks are done, or by `flush()` before the database is
 * written (a checkpoint, the final commit), so that what is translated goes out first. One write a
 * turn, not one an event: in chunked encoding each `res.write` adds a size line and two buffers to
 * the socket's writev, and a 300-token reply from a server that streams one token an event arrives
 * in bursts of tens of events. The text is encoded once, and those bytes are both written and
 * kept as the record's reply: a string kept for the record would survive every young-generation
 * collection of a long reply (copied each time, then promoted) and be encoded to UTF-8 a second
 * time when the row is written.
 */
export class SseWriter {
  private readonly sent: Buffer[] = [];
  private sentBytes = 0;
  /** Text translated this turn, not yet handed to the response. */
  private readonly pending: string[] = [];
  private scheduled = false;
  /** Set while the response's buffer is full: the next write waits for `drain` (or the harness leaving). */
  private blocked: Promise<void> | null = null;

  constructor(
    private readonly res: ServerResponse,
    /** Called on every flush that sends something (the keep-alive timer restarts). */
    private readonly onSend: () => void,
  ) {}

  /** Resolves once the socket takes more; rejects with POLAR_CLIENT_ABORTED if the harness left. */
  async write(events: SseEvent[]): Promise<void> {
    if (events.length > 0) {
      const text = events.length === 1 ? formatSseEvent(events[0]!) : events.map(formatSseEvent).join('');
      this.pending.push(text);
      if (!this.scheduled) {
        this.scheduled = true;
        process.nextTick(this.flush);
      }
    }
    if (this.blocked) await this.blocked;
  }

  /** Hands this turn's text to the response in one write. */
  readonly flush = (): void => {
    this.scheduled = false;
    if (this.pending.length === 0) return;
    const bytes = Buffer.from(this.pending.length === 1 ? this.pending[0]! : this.pending.join(''), 'utf8');
    this.pending.length = 0;
    this.sent.push(bytes);
    this.sentBytes += bytes.length;
    this.onSend();
    if (!this.res.write(bytes) && !this.blocked) {
      const blocked = drained(this.res).finally(() => {
        if (this.blocked === blocked) this.blocked = null;
      });
      // Awaited by the next write; a harness that left with no write pending is the caller's close handler's to see.
      blocked.catch(() => {});
      this.blocked = blocked;
    }
  };

  /**
   * Everything written so far (and translated but not yet flushed: a stream that failed records
   * all it translated, as it did when each event was written at once), then `tail` (the closing
   * events, or an error). Writes nothing.
   */
  bytes(tail = ''): Buffer {
    const rest = this.pending.length > 0 || tail ? Buffer.from(this.pending.join('') + tail, 'utf8') : null;
    return Buffer.concat(rest ? [...this.sent, rest] : this.sent, this.sentBytes + (rest?.length ?? 0));
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

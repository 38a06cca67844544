/**
 * A server-sent events parser per the WHATWG HTML spec (§9.2.6 "Interpreting an event stream"):
 * optional UTF-8 BOM; lines end in CR, LF or CRLF, including a CRLF split across two chunks;
 * `data` fields accumulate with "\n"; lines starting with ":" are comments; a blank line
 * dispatches. UTF-8 sequences split across chunks are decoded whole. An event larger than
 * `maxEventBytes` is an error rather than unbounded memory.
 */

export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
  retry?: number;
}

export interface SseParserOptions {
  maxEventBytes?: number;
  /** Called for each comment line (without the leading ':'), e.g. keep-alives. */
  onComment?: (text: string) => void;
}

export class SseParseError extends Error {
  override name = 'SseParseError';
}

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8', { ignoreBOM: false });
  private readonly maxEventBytes: number;
  private readonly onComment: ((text: string) => void) | undefined;
  private buffer = '';
  private lastWasCR = false;
  private data: string[] = [];
  private dataBytes = 0;
  private eventType: string | undefined;
  private lastId: string | undefined;
  private retry: number | undefined;

  constructor(options: SseParserOptions = {}) {
    this.maxEventBytes = options.maxEventBytes ?? 16 * 1024 * 1024;
    this.onComment = options.onComment;
  }

  /** Feeds bytes; returns the events completed by them. */
  push(chunk: Uint8Array | string): SseEvent[] {
    const text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    return this.consume(text);
  }

  /** Ends the stream. Per the spec, an event not terminated by a blank line is discarded. */
  end(): SseEvent[] {
    const tail = this.decoder.decode();
    const events = tail ? this.consume(tail) : [];
    this.buffer = '';
    this.resetEvent();
    return events;
  }

  private consume(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    if (text.length === 0) return events;
    let start = 0;
    // A CR that ended the previous chunk already ended its line; a LF right after it is part of the CRLF.
    if (this.lastWasCR && text.charCodeAt(0) === 10) start = 1;
    this.lastWasCR = false;
    let pending = this.buffer;
    this.buffer = '';
    // Line ends are found with indexOf (native, fast on 100 KB data lines), not a per-char loop.
    let lf = text.indexOf('\n', start);
    let cr = text.indexOf('\r', start);
    while (lf >= 0 || cr >= 0) {
      const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      const line = pending.length > 0 ? pending + text.slice(start, end) : text.slice(start, end);
      pending = '';
      this.line(line, events);
      start = end + 1;
      if (end === cr) {
        if (start < text.length) {
          if (text.charCodeAt(start) === 10) start++;
        } else {
          this.lastWasCR = true;
        }
      }
      if (lf >= 0 && lf < start) lf = text.indexOf('\n', start);
      if (cr >= 0 && cr < start) cr = text.indexOf('\r', start);
    }
    this.buffer = pending + text.slice(start);
    if (this.buffer.length + this.dataBytes > this.maxEventBytes) {
      throw new SseParseError(`server-sent event larger than ${this.maxEventBytes} bytes`);
    }
    return events;
  }

  private line(line: string, events: SseEvent[]): void {
    if (line.length === 0) {
      this.dispatch(events);
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) {
      this.onComment?.(line.slice(1));
      return;
    }
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon < 0) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      value = line.charCodeAt(colon + 1) === 32 ? line.slice(colon + 2) : line.slice(colon + 1);
    }
    switch (field) {
      case 'data':
        this.data.push(value);
        this.dataBytes += value.length + 1;
        if (this.dataBytes > this.maxEventBytes) {
          throw new SseParseError(`server-sent event larger than ${this.maxEventBytes} bytes`);
        }
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        // unknown fields are ignored (spec)
        break;
    }
  }

  private dispatch(events: SseEvent[]): void {
    if (this.data.length === 0) {
      this.eventType = undefined;
      this.retry = undefined;
      return;
    }
    const event: SseEvent = { data: this.data.join('\n') };
    if (this.eventType !== undefined && this.eventType !== '') event.event = this.eventType;
    if (this.lastId !== undefined) event.id = this.lastId;
    if (this.retry !== undefined) event.retry = this.retry;
    events.push(event);
    this.resetEvent();
  }

  private resetEvent(): void {
    this.data = [];
    this.dataBytes = 0;
    this.eventType = undefined;
    this.retry = undefined;
  }
}

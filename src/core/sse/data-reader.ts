import { SseParseError } from './parse.js';

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const [D, A, T] = [0x64, 0x61, 0x74];
const NEWLINE = Buffer.from('\n');
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const DONE = Buffer.from('[DONE]');

/** An OpenAI-compatible stream's closing `data: [DONE]`. */
export function isDone(data: Buffer): boolean {
  return data.equals(DONE);
}

/**
 * The `data` of each server-sent event, as bytes: for an inference server's stream, whose events
 * carry nothing but `data` (OpenAI-compatible chat, SGLang, vLLM). Same framing as SseParser (the
 * WHATWG rules: CR, LF or CRLF line ends, a CRLF split across chunks, a leading BOM, `data` lines
 * joined with "\n", comments and other fields skipped, a blank line dispatches, an unterminated
 * event at the end discarded), but nothing is decoded: vLLM's first event holds the whole prompt's
 * token ids (~160 KB for a 35k-token prompt), and turning that into a JS string costs ~1 ms on
 * Node 20 (a string that size is a large-object allocation, paid again when it is flattened), while
 * the id scanner reads bytes anyway (upstream/id-arrays.ts).
 */
export class SseDataReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private data: Buffer[] = [];
  private dataBytes = 0;
  private lastWasCR = false;
  private started = false;

  constructor(private readonly maxEventBytes = 16 * 1024 * 1024) {}

  /** Feeds bytes; returns the data of the events they complete. */
  push(chunk: Uint8Array): Buffer[] {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const events: Buffer[] = [];
    let start = 0;
    if (this.lastWasCR && bytes[0] === LF) start = 1;
    this.lastWasCR = false;
    // Servers end lines with LF: one search over the read spares a CR search per line.
    const anyCR = bytes.indexOf(CR, start) >= 0;
    for (;;) {
      const end = anyCR ? lineEnd(bytes, start) : bytes.indexOf(LF, start);
      if (end < 0) break;
      this.line(this.takeLine(bytes.subarray(start, end)), events);
      start = end + 1;
      if (bytes[end] === CR) {
        if (start < bytes.length) {
          if (bytes[start] === LF) start++;
        } else {
          this.lastWasCR = true;
        }
      }
    }
    if (start < bytes.length) {
      this.pending.push(bytes.subarray(start));
      this.pendingBytes += bytes.length - start;
      if (this.pendingBytes + this.dataBytes > this.maxEventBytes) {
        throw new SseParseError(`server-sent event larger than ${this.maxEventBytes} bytes`);
      }
    }
    return events;
  }

  private takeLine(tail: Buffer): Buffer {
    let line = tail;
    if (this.pending.length > 0) {
      line = Buffer.concat([...this.pending, tail], this.pendingBytes + tail.length);
      this.pending = [];
      this.pendingBytes = 0;
    }
    // A BOM can only open the stream, and so its first line (its bytes are no line end).
    if (!this.started) {
      this.started = true;
      if (line.subarray(0, BOM.length).equals(BOM)) line = line.subarray(BOM.length);
    }
    return line;
  }

  private line(line: Buffer, events: Buffer[]): void {
    if (line.length === 0) {
      if (this.data.length > 0) {
        events.push(this.data.length === 1 ? this.data[0]! : Buffer.concat(this.data, this.dataBytes - 1));
        this.data = [];
        this.dataBytes = 0;
      }
      return;
    }
    // The field must be exactly `data` (compared in place: no view per line); comments (an empty
    // field), event, id, retry and unknown fields are skipped.
    if (line.length < 4 || line[0] !== D || line[1] !== A || line[2] !== T || line[3] !== A) return;
    if (line.length > 4 && line[4] !== COLON) return;
    const from = line.length === 4 ? 4 : line[5] === SPACE ? 6 : 5;
    const value = line.subarray(from);
    if (this.data.length > 0) this.data.push(NEWLINE);
    this.data.push(value);
    this.dataBytes += value.length + 1;
    if (this.dataBytes > this.maxEventBytes) {
      throw new SseParseError(`server-sent event larger than ${this.maxEventBytes} bytes`);
    }
  }
}

/** The index of the first CR or LF at or after `from`; -1 when none. */
function lineEnd(bytes: Buffer, from: number): number {
  const lf = bytes.indexOf(LF, from);
  // A CR can only come before the LF (or anywhere, if there is no LF): search that span only.
  const cr = bytes.subarray(from, lf < 0 ? bytes.length : lf).indexOf(CR);
  return cr >= 0 ? from + cr : lf;
}

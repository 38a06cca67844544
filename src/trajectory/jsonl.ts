import { once } from 'node:events';
import { grown } from '../core/grown.js';
import { lineOutput } from '../core/private-file.js';

/**
 * Trajectories as JSONL, fast: the bytes are exactly `JSON.stringify(trace)` and a newline, but the
 * token arrays (tens of thousands of numbers per trace; a per-request export is every call's whole
 * prompt) are written as ASCII digits straight into a byte buffer, where JSON.stringify builds a
 * string per trace that is then encoded to UTF-8 again; the profile of `polar reconstruct` had
 * JSON.stringify at 40-50% of the run. Everything else in a trace (strings, metadata) still goes
 * through JSON.stringify, so escaping and key order are its own.
 */

/** The fields written by the fast path, when they are arrays of numbers. */
const NUMBER_ARRAYS: ReadonlySet<string> = new Set(['prompt_ids', 'response_ids', 'loss_mask', 'response_logprobs']);

/** A growing byte buffer that lines are written into. */
export class LineBuffer {
  buf = Buffer.allocUnsafe(1 << 16);
  length = 0;

  /** Room for `n` more bytes. */
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }

  text(s: string): void {
    this.room(s.length * 3);
    this.length += this.buf.write(s, this.length, 'utf8');
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.length++] = b;
  }

  /** The bytes so far, handed over (the buffer starts again empty). */
  take(): Buffer {
    const out = this.buf.subarray(0, this.length);
    this.buf = Buffer.allocUnsafe(this.buf.length);
    this.length = 0;
    return out;
  }

  /**
   * A JSON array of numbers, as JSON.stringify writes it: integers (ids, mask, zero logprobs) as
   * digits here; other finite numbers by String() (JSON's own number-to-text); the rest null.
   * False (nothing written) when an element is not a number: the caller falls back.
   */
  numbers(values: readonly unknown[]): boolean {
    for (let i = 0; i < values.length; i++) if (typeof values[i] !== 'number') return false;
    // 12 bytes hold any int32 and its comma; other numbers are measured as they come.
    this.room(values.length * 12 + 2);
    const buf = this.buf;
    let at = this.length;
    buf[at++] = 0x5b; // [
    for (let i = 0; i < values.length; i++) {
      if (i > 0) buf[at++] = 0x2c; // ,
      const v = values[i] as number;
      if ((v | 0) === v) {
        at = writeInt(buf, at, v);
        continue;
      }
      const s = Number.isFinite(v) ? String(v) : 'null';
      this.length = at;
      this.room(s.length + 1);
      at = writeAscii(this.buf, this.length, s);
      return this.finishFrom(values, i + 1, at);
    }
    buf[at++] = 0x5d; // ]
    this.length = at;
    return true;
  }

  /**
   * The last prompt written: its ids (a copy) and their JSON text without brackets, with where each
   * id's text ends. Per-request traces are a session's calls in order, and each call's prompt starts
   * with the one before it, so a prompt's text is mostly the last one's: copied, not rewritten.
   */
  private memoIds = new Float64Array(1024);
  private memoEnds = new Int32Array(1024);
  private memoText = Buffer.allocUnsafe(1 << 14);
  private memoLength = 0;

  /** numbers() for a prompt, reusing the last prompt's text for the ids they share (JSON.stringify's bytes all the same). */
  prompt(values: readonly unknown[]): boolean {
    const n = values.length;
    let k = 0;
    const shared = Math.min(n, this.memoLength);
    const ids = this.memoIds;
    while (k < shared && values[k] === ids[k]) k++;
    for (let i = k; i < n; i++) if (typeof values[i] !== 'number') return false;
    if (n > ids.length) {
      this.memoIds = grown(ids, n, k);
      this.memoEnds = grown(this.memoEnds, n, k);
    }
    let at = k > 0 ? this.memoEnds[k - 1]! : 0;
    for (let i = k; i < n; i++) {
      const v = values[i] as number;
      if (at + 400 > this.memoText.length) {
        const next = Buffer.allocUnsafe(Math.max(this.memoText.length * 2, at + (n - i) * 12 + 400));
        this.memoText.copy(next, 0, 0, at);
        this.memoText = next;
      }
      if (i > 0) this.memoText[at++] = 0x2c;
      if ((v | 0) === v) at = writeInt(this.memoText, at, v);
      else at = writeAscii(this.memoText, at, Number.isFinite(v) ? String(v) : 'null');
      this.memoIds[i] = v;
      this.memoEnds[i] = at;
    }
    this.memoLength = n;
    this.room(at + 2);
    this.buf[this.length++] = 0x5b;
    this.length += this.memoText.copy(this.buf, this.length, 0, at);
    this.buf[this.length++] = 0x5d;
    return true;
  }

  /** numbers() from element `from` on, after a number that needed text (the buffer may have moved). */
  private finishFrom(values: readonly unknown[], from: number, at: number): boolean {
    for (let i = from; i < values.length; i++) {
      this.length = at;
      const v = values[i] as number;
      if ((v | 0) === v) {
        this.room(12);
        this.buf[at++] = 0x2c;
        at = writeInt(this.buf, at, v);
      } else {
        const s = Number.isFinite(v) ? String(v) : 'null';
        this.room(s.length + 1);
        this.buf[at++] = 0x2c;
        at = writeAscii(this.buf, at, s);
      }
    }
    this.length = at;
    this.room(1);
    this.buf[this.length++] = 0x5d;
    return true;
  }
}

/**
 * A number's text (ASCII: digits, sign, point, exponent) at `at`, returns the end: a loop in JS,
 * cheaper for a few characters than a call into Buffer.write per logprob.
 */
function writeAscii(buf: Uint8Array, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) buf[at + i] = s.charCodeAt(i);
  return at + s.length;
}

/** An int32's decimal digits at `at`; returns the end. (-0 is 0, as JSON writes it.) */
function writeInt(buf: Uint8Array, at: number, value: number): number {
  let v = value;
  if (v < 0) {
    buf[at++] = 0x2d;
    v = -v;
  }
  const digits = v < 10 ? 1 : v < 100 ? 2 : v < 1e3 ? 3 : v < 1e4 ? 4 : v < 1e5 ? 5 : v < 1e6 ? 6 : v < 1e7 ? 7 : v < 1e8 ? 8 : v < 1e9 ? 9 : 10;
  const last = at + digits;
  let end = last;
  while (end > at) {
    // 2^31 (the one int32 whose negation is not one) still divides exactly as a double.
    const q = v < 2 ** 31 ? (v / 10) | 0 : Math.floor(v / 10);
    buf[--end] = 0x30 + (v - q * 10);
    v = q;
  }
  return last;
}

/**
 * Appends one trace's line. Key order, skipped keys and every value other than the token arrays
 * are JSON.stringify's own.
 */
export function writeTraceLine(out: LineBuffer, trace: object): void {
  if (typeof (trace as { toJSON?: unknown }).toJSON === 'function') {
    out.text(`${JSON.stringify(trace)}\n`);
    return;
  }
  out.byte(0x7b); // {
  let first = true;
  for (const key of Object.keys(trace)) {
    const value = (trace as Record<string, unknown>)[key];
    const start = out.length;
    out.text(`${first ? '' : ','}${JSON.stringify(key)}:`);
    if (key === 'prompt_ids' && Array.isArray(value) && out.prompt(value)) {
      first = false;
      continue;
    }
    if (NUMBER_ARRAYS.has(key) && Array.isArray(value) && out.numbers(value)) {
      first = false;
      continue;
    }
    const json = JSON.stringify(value);
    if (json === undefined) {
      out.length = start; // a key JSON.stringify leaves out (undefined, a function)
      continue;
    }
    out.text(json);
    first = false;
  }
  out.text('}\n');
}

/**
 * JSONL of traces to a file (created 0600: it holds training data) or stdout. Lines are gathered
 * into chunks of about a megabyte, and a chunk is waited on only when several are queued, so
 * building the next lines overlaps writing the last.
 */
export function traceLines(file: string | undefined): { write(trace: object): Promise<void>; close(): Promise<void> } {
  const { out, end } = lineOutput(file);
  const lines = new LineBuffer();
  const CHUNK = 1 << 20;
  const QUEUED = 8 << 20;
  const flush = async () => {
    if (lines.length === 0) return;
    out.write(lines.take());
    if (out.writableLength > QUEUED) await once(out, 'drain');
  };
  return {
    async write(trace) {
      writeTraceLine(lines, trace);
      if (lines.length >= CHUNK) await flush();
    },
    async close() {
      await flush();
      await end();
    },
  };
}

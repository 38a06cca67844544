/**
 * An upstream body written with the request's own bytes wherever it reuses the request's values.
 *
 * An adapter that passes the request through (OpenAI Chat to vLLM) builds its upstream body from the
 * parsed request: a new top-level object with the training flags, a `messages` array that keeps most
 * of the harness's message objects as they are, and its `tools` array untouched. Serialising that
 * body writes ~100 KB of text the request already holds as bytes. Here each value the body shares
 * with the parsed request (the same object, found by identity) is copied from the request's bytes,
 * and only the rest is serialised: the flags, and the few messages an adapter rewrote.
 *
 * Values are found at the two levels adapters share: the request's top-level members and the
 * elements of its top-level arrays (by name and by index, where JSON and the parsed value agree on
 * order; deeper, an object's integer-like keys would not). A copied value is byte for byte what the
 * harness sent, so it parses to what the body holds: JSON.parse of the result equals JSON.parse of
 * JSON.stringify(body), and where the request was written as JSON.stringify writes (no spaces, the
 * same escapes) the bytes are equal too. Values must not have been changed in place after parsing:
 * the codecs and adapters build new objects for what they change (wire-body.test.ts parses frozen).
 */

import { isEscaped, isJsonSpace } from '../core/json-bytes.js';

const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** Where a value sits in the request's bytes: [start, end). */
type Span = readonly [start: number, end: number];

/**
 * The upstream body as bytes, copying from `bytes` every value it shares with `parsed` (which must
 * be `bytes` read by parseAsBytes, one byte per character) and serialising the rest one byte per
 * character. Null when the request is not a JSON object.
 */
export function spliceBody(bytes: Buffer, parsed: unknown, body: Record<string, unknown>): Buffer | null {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
  const spans = sharedSpans(bytes, parsed as Record<string, unknown>);
  if (spans === null) return null;
  const out = new SplicedWriter(bytes, spans);
  out.write(body);
  return out.finish();
}

/** Objects and arrays of the parsed request, each with its span: top-level members, and the elements of top-level arrays. */
function sharedSpans(bytes: Buffer, parsed: Record<string, unknown>): Map<object, Span> | null {
  const members = memberSpans(bytes);
  if (members === null) return null;
  const spans = new Map<object, Span>();
  for (const [key, member] of members) {
    const value = parsed[key];
    if (value === null || typeof value !== 'object') continue;
    spans.set(value, member.span);
    if (Array.isArray(value) && member.items !== undefined && member.items.length === value.length) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        if (item !== null && typeof item === 'object') spans.set(item, member.items[i]!);
      }
    }
  }
  return spans;
}

interface MemberSpan {
  span: Span;
  /** The elements' spans, when the member is an array. */
  items?: Span[];
}

/**
 * Each top-level member's value span, keyed as parseAsBytes keys it (the key's JSON read one byte
 * per character); a repeated key keeps its last value, as JSON.parse does. Null when the bytes are
 * not one JSON object (they parsed already; this only guards the scanner).
 */
export function memberSpans(bytes: Buffer): Map<string, MemberSpan> | null {
  const members = new Map<string, MemberSpan>();
  try {
    let at = skipSpace(bytes, 0);
    if (bytes[at] !== OPEN_BRACE) return null;
    at = skipSpace(bytes, at + 1);
    if (bytes[at] === CLOSE_BRACE) return members;
    for (;;) {
      if (bytes[at] !== QUOTE) return null;
      const keyEnd = stringEnd(bytes, at);
      const key = JSON.parse(bytes.toString('latin1', at, keyEnd)) as string;
      at = skipSpace(bytes, keyEnd);
      if (bytes[at] !== COLON) return null;
      const start = skipSpace(bytes, at + 1);
      const items: Span[] | undefined = bytes[start] === OPEN_BRACKET ? [] : undefined;
      const end = items ? arrayEnd(bytes, start, items) : valueEnd(bytes, start);
      members.set(key, { span: [start, end], items });
      at = skipSpace(bytes, end);
      if (bytes[at] === CLOSE_BRACE) return members;
      if (bytes[at] !== COMMA) return null;
      at = skipSpace(bytes, at + 1);
    }
  } catch {
    return null;
  }
}

/** The end of the array at `start`, pushing each element's span. */
function arrayEnd(bytes: Buffer, start: number, items: Span[]): number {
  let at = skipSpace(bytes, start + 1);
  if (bytes[at] === CLOSE_BRACKET) return at + 1;
  for (;;) {
    const end = valueEnd(bytes, at);
    items.push([at, end]);
    at = skipSpace(bytes, end);
    if (bytes[at] === CLOSE_BRACKET) return at + 1;
    if (bytes[at] !== COMMA) throw new SyntaxError('expected , or ]');
    at = skipSpace(bytes, at + 1);
  }
}

/** The end of the value at `start`: a string, an object or array (skipping the strings inside), or a literal. */
function valueEnd(bytes: Buffer, start: number): number {
  const first = bytes[start];
  if (first === QUOTE) return stringEnd(bytes, start);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let at = start; at < bytes.length; ) {
      const c = bytes[at]!;
      if (c === QUOTE) {
        at = stringEnd(bytes, at);
        continue;
      }
      if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) return at + 1;
      at++;
    }
    throw new SyntaxError('unterminated value');
  }
  let at = start;
  while (at < bytes.length && !isDelimiter(bytes[at]!)) at++;
  if (at === start) throw new SyntaxError('expected a value');
  return at;
}

/** The end of the string whose opening quote is at `start` (just past its closing quote). */
function stringEnd(bytes: Buffer, start: number): number {
  for (let from = start + 1; ; ) {
    const quote = bytes.indexOf(QUOTE, from);
    if (quote < 0) throw new SyntaxError('unterminated string');
    if (!isEscaped(bytes, quote)) return quote + 1;
    from = quote + 1;
  }
}

function skipSpace(bytes: Buffer, at: number): number {
  while (isJsonSpace(bytes[at])) at++;
  return at;
}

function isDelimiter(c: number): boolean {
  return c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || isJsonSpace(c);
}

/** JSON.stringify's output, with shared values copied as bytes; text is written one byte per character. */
class SplicedWriter {
  private readonly parts: Buffer[] = [];
  private text = '';
  private wide = false;
  /** The body's objects and arrays that hold a shared value somewhere inside: only these are walked. */
  private readonly holding = new Set<object>();

  constructor(
    private readonly bytes: Buffer,
    private readonly spans: Map<object, Span>,
  ) {}

  write(body: unknown): void {
    this.markHolding(body);
    this.value(body);
  }

  private value(value: unknown): void {
    // A value with nothing shared inside is serialised whole, natively: a translated body (Anthropic,
    // Responses, Google into Chat) shares nothing with its request, and one JSON.stringify of it is
    // ~40% faster than writing it member by member.
    if (
      value === null ||
      typeof value !== 'object' ||
      typeof (value as { toJSON?: unknown }).toJSON === 'function' ||
      !(this.spans.has(value) || this.holding.has(value))
    ) {
      this.text += JSON.stringify(value);
      return;
    }
    const span = this.spans.get(value);
    if (span !== undefined) {
      this.flush();
      this.parts.push(this.bytes.subarray(span[0], span[1]));
      return;
    }
    if (Array.isArray(value)) {
      this.text += '[';
      for (let i = 0; i < value.length; i++) {
        if (i > 0) this.text += ',';
        const item: unknown = value[i];
        if (item === undefined || typeof item === 'function' || typeof item === 'symbol') this.text += 'null';
        else this.value(item);
      }
      this.text += ']';
      return;
    }
    this.text += '{';
    let first = true;
    for (const key of Object.keys(value)) {
      const item: unknown = (value as Record<string, unknown>)[key];
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
      this.text += first ? `${JSON.stringify(key)}:` : `,${JSON.stringify(key)}:`;
      first = false;
      this.value(item);
    }
    this.text += '}';
  }

  /** Whether `value` is or holds a shared value; records in `holding` the objects and arrays that hold one. */
  private markHolding(value: unknown): boolean {
    if (value === null || typeof value !== 'object') return false;
    if (this.spans.has(value)) return true;
    let found = false;
    for (const item of Array.isArray(value) ? value : Object.values(value)) if (this.markHolding(item)) found = true;
    if (found) this.holding.add(value);
    return found;
  }

  /** The body's bytes; null when some text held a character above U+00FF (a real string, not bytes). */
  finish(): Buffer | null {
    this.flush();
    if (this.wide) return null;
    return this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
  }

  private flush(): void {
    if (this.text === '') return;
    if (WIDE_CHAR.test(this.text)) this.wide = true;
    this.parts.push(Buffer.from(this.text, 'latin1'));
    this.text = '';
  }
}

const WIDE_CHAR = /[^\x00-\xff]/;

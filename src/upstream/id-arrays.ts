/**
 * JSON.parse for replies that carry the prompt's token ids (vLLM `prompt_token_ids`: tens of
 * thousands of integers, most of a reply's bytes). Each `"prompt_token_ids":[…]` array is read
 * straight from the reply's bytes into a Uint32Array and replaced by a placeholder, so neither the
 * UTF-8 decoder nor the generic parser touches it (a reply with any non-ASCII text in it decodes at
 * a tenth of the ASCII speed); the arrays are put back where they were, holding exactly the values
 * JSON.parse would give. Anything but plain non-negative integer literals (or a key that is not
 * structural) falls back to JSON.parse of the whole text, which then reports what is wrong as before.
 */

import { isEscaped, isJsonSpace } from '../core/json-bytes.js';

const KEY = Buffer.from('"prompt_token_ids":[');
const FIELD = 'prompt_token_ids';
/** Below this size the generic parser is as fast. */
const MIN_FAST_BYTES = 8192;
const NON_ASCII = /[^\x00-\x7f]/;

export function parseJsonWithIdArrays(input: string | Buffer): unknown {
  if (typeof input === 'string') {
    // A text that is all ASCII is its own bytes (a streamed event; the one with the prompt ids
    // has no reply text yet). Any other text goes to the generic parser.
    if (input.length < MIN_FAST_BYTES || !input.includes(FIELD) || NON_ASCII.test(input)) return JSON.parse(input);
    return parseBytes(Buffer.from(input, 'latin1'));
  }
  if (input.length < MIN_FAST_BYTES) return JSON.parse(input.toString('utf8'));
  return parseBytes(input);
}

function parseBytes(bytes: Buffer): unknown {
  const arrays: Uint32Array[] = [];
  const parts: Buffer[] = [];
  let from = 0;
  let at = bytes.indexOf(KEY);
  while (at >= 0) {
    // An escaped quote is inside a string, not a key.
    if (isEscaped(bytes, at)) return JSON.parse(bytes.toString('utf8'));
    const open = at + KEY.length - 1;
    const scanned = scanIds(bytes, open + 1);
    if (!scanned) return JSON.parse(bytes.toString('utf8'));
    arrays.push(scanned.ids);
    // The array becomes -n (n = its position, from 1): never a token id, so it cannot be mistaken.
    parts.push(bytes.subarray(from, open), Buffer.from(String(-arrays.length)));
    from = scanned.end;
    at = bytes.indexOf(KEY, from);
  }
  if (arrays.length === 0) return JSON.parse(bytes.toString('utf8'));
  parts.push(bytes.subarray(from));
  const parsed = JSON.parse(Buffer.concat(parts).toString('utf8')) as unknown;
  restore(parsed, arrays);
  return parsed;
}

/** Integers from `start` to the closing bracket; null on anything else. `end` is past the bracket. */
function scanIds(bytes: Buffer, start: number): { ids: Uint32Array; end: number } | null {
  // At most one id per two bytes ("1,"): written into a typed array, never pushed (pushing tens
  // of thousands of numbers onto a JS array costs more than JSON.parse itself). The scratch array is
  // reused across replies and only the ids are copied out.
  const ids = scratchFor(Math.ceil((bytes.length - start) / 2) + 1);
  const compact = scanCompact(bytes, start, ids);
  if (compact) return { ids: ids.slice(0, compact.n), end: compact.end };
  let n = 0;
  let value = 0;
  let digits = 0;
  let expectValue = true;
  for (let i = start; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c >= 0x30 && c <= 0x39) {
      if (!expectValue && digits === 0) return null;
      // A leading zero is only valid alone; more than 10 digits is past uint32.
      if ((digits === 1 && value === 0) || ++digits > 10) return null;
      value = value * 10 + (c - 0x30);
      continue;
    }
    if (digits > 0) {
      if (value > 0xffffffff) return null;
      ids[n++] = value;
      value = 0;
      digits = 0;
      expectValue = false;
    }
    if (c === 0x2c) {
      if (expectValue) return null;
      expectValue = true;
    } else if (c === 0x5d) {
      if (expectValue && n > 0) return null;
      return { ids: ids.slice(0, n), end: i + 1 };
    } else if (!isJsonSpace(c)) {
      return null;
    }
  }
  return null;
}

/**
 * The array as servers write it, `1,22,333]` with no spaces: one tight loop per number (~3× the
 * general scanner's speed). Null on anything else, which the general scanner then reads (or refuses).
 */
function scanCompact(bytes: Buffer, start: number, ids: Uint32Array): { n: number; end: number } | null {
  const len = bytes.length;
  let i = start;
  let n = 0;
  if (bytes[i] === 0x5d) return { n, end: i + 1 };
  while (i < len) {
    let x = bytes[i]! - 0x30;
    if (x >>> 0 > 9) return null;
    let value = x;
    let digits = 1;
    i++;
    if (value === 0) {
      // A leading zero is only valid alone.
      if (i < len && (bytes[i]! - 0x30) >>> 0 <= 9) return null;
    } else {
      while (i < len) {
        x = bytes[i]! - 0x30;
        if (x >>> 0 > 9) break;
        value = value * 10 + x;
        i++;
        digits++;
      }
      if (digits > 10 || value > 0xffffffff) return null;
    }
    ids[n++] = value;
    const c = bytes[i++];
    if (c === 0x2c) continue;
    if (c === 0x5d) return { n, end: i };
    return null;
  }
  return null;
}

let scratch = new Uint32Array(0);

/** Kept between replies up to 4 MiB (a 2 MB reply); larger ones get their own. */
const MAX_SCRATCH = 1 << 20;

function scratchFor(size: number): Uint32Array {
  if (scratch.length >= size) return scratch;
  if (size > MAX_SCRATCH) return new Uint32Array(size);
  scratch = new Uint32Array(Math.min(MAX_SCRATCH, Math.max(size, scratch.length * 2)));
  return scratch;
}

/** Puts each array back in place of its placeholder under a `prompt_token_ids` key. */
function restore(value: unknown, arrays: Uint32Array[]): void {
  if (Array.isArray(value)) {
    for (const v of value) if (v !== null && typeof v === 'object') restore(v, arrays);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    if (key === FIELD && typeof v === 'number' && v < 0) obj[key] = arrays[-v - 1];
    else if (v !== null && typeof v === 'object') restore(v, arrays);
  }
}

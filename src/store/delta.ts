/**
 * How a call's data is stored against an earlier call's (pure). An agent's calls grow by appending:
 * each prompt is the previous prompt, its answer and the new turn; each request body is the
 * previous body with the new messages in the middle (where the `messages` array ends and the
 * fields after it begin). So a row keeps only what is new, plus a reference:
 *
 * - prompt ids: the first `baseLength` tokens of the base call's prompt + sampled ids, then the
 *   row's own suffix;
 * - a body: the base body's first `prefix` characters, the row's own middle, the base body's last
 *   `suffix` characters.
 *
 * A session of n turns then stores O(n) tokens and characters instead of O(n²). Storing a delta
 * against the same agent's previous body was chosen over content-addressed chunks: the delta is
 * exactly the new turn (chunk manifests would still grow with the body, and chunk boundaries need a
 * rolling hash over every byte on the call path), and a whole session reads back in one pass.
 */

/** Tokens below this many shared are stored whole: a reference would save nothing worth a lookup. */
export const MIN_SHARED_TOKENS = 32;
/** Characters below this many shared are stored whole. */
export const MIN_SHARED_CHARS = 512;

export interface StringDelta {
  prefix: number;
  suffix: number;
  middle: string;
}

/**
 * `text` as `base`'s first `prefix` characters + `middle` + `base`'s last `suffix` characters, with
 * the shared ends as long as they go (never splitting a surrogate pair, so every part is valid
 * UTF-16 and stores as UTF-8). Null when the ends share too little to be worth it.
 */
export function stringDelta(base: string, text: string): StringDelta | null {
  const ends = sharedEnds(
    base.length,
    text.length,
    (max) => sharedHead(base, text, max),
    (limit) => sharedTail(base, text, limit),
    (at) => isHighSurrogate(text.charCodeAt(at - 1)) && isLowSurrogate(text.charCodeAt(at)),
  );
  return ends && { ...ends, middle: text.slice(ends.prefix, text.length - ends.suffix) };
}

/**
 * How far a base and a text share their start (`head`) and end (`tail`, within what the start left),
 * each cut back while `splits(at)` says cutting the text there would split a character; null when
 * they share too little to be worth it.
 */
function sharedEnds(
  baseLength: number,
  textLength: number,
  head: (max: number) => number,
  tail: (limit: number) => number,
  splits: (at: number) => boolean,
): { prefix: number; suffix: number } | null {
  let prefix = head(Math.min(baseLength, textLength));
  while (prefix > 0 && prefix < textLength && splits(prefix)) prefix--;
  let suffix = tail(Math.min(baseLength, textLength) - prefix);
  while (suffix > 0 && splits(textLength - suffix)) suffix--;
  return prefix + suffix < MIN_SHARED_CHARS ? null : { prefix, suffix };
}

export function applyStringDelta(base: string, d: StringDelta): string {
  if (d.prefix + d.suffix > base.length) throw new RangeError(`delta takes ${d.prefix} + ${d.suffix} characters from a base of ${base.length}`);
  return base.slice(0, d.prefix) + d.middle + base.slice(base.length - d.suffix);
}

/**
 * A request body to store: its text, or its UTF-8 bytes (the proxy's bodies, which it never decodes:
 * proxy/wire-body.ts). Bytes are written as TEXT with the same bytes, so a reader cannot tell.
 */
export type BodyText = string | Buffer;

/**
 * stringDelta for bodies held as UTF-8 bytes (the proxy's, which it never decodes). The shared ends
 * are found by native comparisons and cut at character boundaries (never inside a UTF-8 sequence),
 * and `prefix`/`suffix` are given in UTF-16 code units, the unit every stored delta uses, so a row
 * written from bytes reads back with applyStringDelta like any other; `middle` is the new bytes (a
 * view of `text`). Counting units costs a pass over what is counted, so the prefix is counted from
 * the end of the base (`baseUnits` minus the base's unshared tail): the work is the new turn's size,
 * not the body's. `units` is the text's own length in UTF-16 units, for the next delta against it.
 */
export function byteDelta(base: Buffer, baseUnits: number, text: Buffer): { prefix: number; suffix: number; middle: Buffer; units: number } | null {
  const ends = sharedEnds(
    base.length,
    text.length,
    (max) => sharedHeadBytes(base, text, max),
    (limit) => sharedTailBytes(base, text, limit),
    (at) => isContinuation(text[at]!),
  );
  if (!ends) return null;
  const { prefix, suffix } = ends;
  const prefixUnits = baseUnits - utf16Units(base, prefix, base.length);
  const suffixUnits = utf16Units(text, text.length - suffix, text.length);
  return {
    prefix: prefixUnits,
    suffix: suffixUnits,
    middle: text.subarray(prefix, text.length - suffix),
    units: prefixUnits + utf16Units(text, prefix, text.length - suffix) + suffixUnits,
  };
}

/** UTF-16 code units in bytes `from`–`to` of UTF-8 cut at character boundaries: one per sequence, two for a 4-byte one. */
export function utf16Units(bytes: Uint8Array, from: number, to: number): number {
  let units = 0;
  for (let i = from; i < to; i++) {
    const c = bytes[i]!;
    if (c < 0x80) units++;
    else if (c >= 0xf0) units += 2;
    else if (c >= 0xc0) units++;
  }
  return units;
}

function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}

/** The length of the common start, found block by block with native comparisons, then by character. */
function sharedHead(a: string, b: string, max: number): number {
  let i = 0;
  for (let block = 4096; block >= 64; block >>= 4) {
    while (i + block <= max && a.slice(i, i + block) === b.slice(i, i + block)) i += block;
  }
  while (i < max && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

function sharedTail(a: string, b: string, limit: number): number {
  let n = 0;
  while (n < limit && a.charCodeAt(a.length - 1 - n) === b.charCodeAt(b.length - 1 - n)) n++;
  return n;
}

/** sharedHead for bytes: blocks compared in place (memcmp, nothing copied). */
function sharedHeadBytes(a: Buffer, b: Buffer, max: number): number {
  let i = 0;
  for (let block = 4096; block >= 64; block >>= 4) {
    while (i + block <= max && b.compare(a, i, i + block, i, i + block) === 0) i += block;
  }
  while (i < max && a[i] === b[i]) i++;
  return i;
}

/** The length of the common end of two byte runs, at most `limit`. */
function sharedTailBytes(a: Buffer, b: Buffer, limit: number): number {
  let n = 0;
  for (let block = 4096; block >= 64; block >>= 4) {
    while (n + block <= limit && b.compare(a, a.length - n - block, a.length - n, b.length - n - block, b.length - n) === 0) n += block;
  }
  while (n < limit && a[a.length - 1 - n] === b[b.length - 1 - n]) n++;
  return n;
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

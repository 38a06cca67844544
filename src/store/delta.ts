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

export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

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
  const ends = sharedEnds(base, text, (at) => isHighSurrogate(text.charCodeAt(at - 1)) && isLowSurrogate(text.charCodeAt(at)));
  return ends && { ...ends, middle: text.slice(ends.prefix, text.length - ends.suffix) };
}

/**
 * How far `base` and `text` share their start and end, each cut back while `splits(at)` says
 * cutting `text` there would split a character; null when they share too little to be worth it.
 */
function sharedEnds(base: string, text: string, splits: (at: number) => boolean): { prefix: number; suffix: number } | null {
  const max = Math.min(base.length, text.length);
  let prefix = sharedHead(base, text, max);
  while (prefix > 0 && prefix < text.length && splits(prefix)) prefix--;
  let suffix = 0;
  const limit = max - prefix;
  while (suffix < limit && base.charCodeAt(base.length - 1 - suffix) === text.charCodeAt(text.length - 1 - suffix)) suffix++;
  while (suffix > 0 && splits(text.length - suffix)) suffix--;
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
 * stringDelta for bodies held as bytes: `base` and `text` are UTF-8 bytes one per character
 * (latin1). The shared ends are cut at character boundaries (never inside a UTF-8 sequence), and
 * `prefix`/`suffix` are given in UTF-16 code units, the unit every stored delta uses, so a row
 * written from bytes reads back with applyStringDelta like any other; `middle` is the new bytes.
 * Counting units costs a pass over what is counted, so the prefix is counted from the end of the
 * base (`baseUnits` minus the base's unshared tail): the work is the new turn's size, not the body's.
 * `units` is the text's own length in UTF-16 units, for the next delta against it.
 */
export function byteDelta(base: string, baseUnits: number, text: string): { prefix: number; suffix: number; middle: Buffer; units: number } | null {
  const ends = sharedEnds(base, text, (at) => isContinuation(text.charCodeAt(at)));
  if (!ends) return null;
  const { prefix, suffix } = ends;
  const prefixUnits = baseUnits - utf16Units(base, prefix, base.length);
  const suffixUnits = utf16Units(text, text.length - suffix, text.length);
  return {
    prefix: prefixUnits,
    suffix: suffixUnits,
    middle: Buffer.from(text.slice(prefix, text.length - suffix), 'latin1'),
    units: prefixUnits + utf16Units(text, prefix, text.length - suffix) + suffixUnits,
  };
}

/** UTF-16 code units in bytes `from`–`to` of a byte string cut at character boundaries: one per sequence, two for a 4-byte one. */
export function utf16Units(bytes: string, from: number, to: number): number {
  let units = 0;
  for (let i = from; i < to; i++) {
    const c = bytes.charCodeAt(i);
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

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { describe, expect, it } from 'vitest';
import { BUNDLED_QWEN3, qwen3ModelDir } from '../core/bundled-tokenizer.js';
import { loadTokenText, utf8WithEscapes } from './tokenizer.js';

/** A display piece back to its bytes: \xNN escapes are single bytes, the rest is UTF-8. */
function pieceBytes(piece: string): number[] {
  const out: number[] = [];
  for (const part of piece.split(/(\\x[0-9a-f]{2})/)) {
    if (/^\\x[0-9a-f]{2}$/.test(part)) out.push(parseInt(part.slice(2), 16));
    else out.push(...new TextEncoder().encode(part));
  }
  return out;
}

describe('token pieces for display', () => {
  it('keeps whole UTF-8 characters and escapes the bytes of a split one', () => {
    expect(utf8WithEscapes(new TextEncoder().encode('café 日本'))).toBe('café 日本');
    expect(utf8WithEscapes(new TextEncoder().encode('日').subarray(0, 2))).toBe('\\xe6\\x97');
    expect(utf8WithEscapes(Uint8Array.of(0x41, 0xa5, 0x42))).toBe('A\\xa5B');
    // A surrogate encoded in UTF-8 is not a character.
    expect(utf8WithEscapes(Uint8Array.of(0xed, 0xa0, 0x80))).toBe('\\xed\\xa0\\x80');
  });

  it("a byte-level BPE token's piece is exactly its bytes: the pieces of a text join back to its UTF-8", () => {
    const dir = qwen3ModelDir();
    const tokenizer = new Tokenizer(
      JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
      JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
    );
    const text = loadTokenText(BUNDLED_QWEN3);
    const sample = 'Hello 🦜 parrot, naïve 日本語!\n\tdone';
    const ids: number[] = tokenizer.encode(sample, { add_special_tokens: false }).ids;
    const pieces = ids.map((id) => text.piece!(id));
    // The emoji is split over byte tokens: some piece holds only part of it.
    expect(pieces.some((p: string) => /\\x[0-9a-f]{2}/.test(p))).toBe(true);
    expect(pieces.flatMap(pieceBytes)).toEqual([...new TextEncoder().encode(sample)]);
    expect(text.piece!(151644)).toBe('<|im_start|>');
  });
});

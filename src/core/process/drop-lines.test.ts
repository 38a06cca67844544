import { describe, expect, it } from 'vitest';
import { LineDropper } from './drop-lines.js';

const NOISE = '[claude-code:unrecognized_model] ';

/** `text` through a dropper in the given chunks, with what `end()` returns. */
function through(starts: readonly string[], chunks: readonly string[]): string {
  const d = new LineDropper(starts);
  return chunks.map((c) => d.write(Buffer.from(c)).toString()).join('') + d.end().toString();
}

describe('LineDropper', () => {
  const text = `warning: one\n${NOISE}{"model":"Qwen/Qwen3-8B","query_source":"sdk"}\n[claude-code:other] kept\nlast line, no newline`;
  const expected = 'warning: one\n[claude-code:other] kept\nlast line, no newline';

  it('drops the lines that start with a given start, wherever the chunks split them', () => {
    expect(through([NOISE], [text])).toBe(expected);
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j += 7) expect(through([NOISE], [text.slice(0, i), text.slice(i, j), text.slice(j)]), `${i},${j}`).toBe(expected);
    }
  });

  it('passes bytes through as they come unless they could still begin a dropped line', () => {
    const d = new LineDropper([NOISE]);
    expect(d.write(Buffer.from('progress 10%')).toString()).toBe('progress 10%');
    expect(d.write(Buffer.from(' 20%\n[claude')).toString()).toBe(' 20%\n');
    expect(d.write(Buffer.from('-code:other]')).toString()).toBe('[claude-code:other]');
    expect(d.end().toString()).toBe('');
  });

  it('drops a line at the very start, a line of its own at the end, and several starts', () => {
    expect(through([NOISE, 'noise:'], [`${NOISE}x\nnoise: y\nkeep\n${NOISE}z`])).toBe('keep\n');
    expect(through([NOISE], [NOISE.slice(0, 5)])).toBe(NOISE.slice(0, 5));
  });

  it('with no starts, is the identity', () => {
    const d = new LineDropper([]);
    const chunk = Buffer.from('a\nb');
    expect(d.write(chunk)).toBe(chunk);
  });

  it('keeps multi-byte characters split across chunks whole', () => {
    const bytes = Buffer.from(`é ✓\n${NOISE}x\n✓`);
    const d = new LineDropper([NOISE]);
    const out = Buffer.concat([...bytes].map((b) => d.write(Buffer.from([b]))).concat(d.end()));
    expect(out.toString()).toBe('é ✓\n✓');
  });
});

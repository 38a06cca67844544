const NEWLINE = 0x0a;

/**
 * Passes a byte stream through with every line that starts with one of `starts` taken out, newline
 * and all. Lines are not held back: a chunk's bytes go out as they come, except a line's first bytes
 * while they could still begin a dropped line (at most the longest start). `end()` returns what is
 * still held, a last line without a newline that never became a dropped one.
 */
export class LineDropper {
  private readonly starts: Buffer[];
  /** The start of the current line, while it could still begin a dropped line. */
  private held = Buffer.alloc(0);
  private atLineStart = true;
  private dropping = false;

  constructor(starts: readonly string[]) {
    this.starts = starts.filter((s) => s !== '').map((s) => Buffer.from(s, 'utf8'));
  }

  write(chunk: Buffer): Buffer {
    if (this.starts.length === 0) return chunk;
    const out: Buffer[] = [];
    let pos = 0;
    while (pos < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, pos);
      const lineEnd = newline === -1 ? chunk.length : newline + 1;
      if (this.dropping) {
        if (newline !== -1) [this.dropping, this.atLineStart] = [false, true];
      } else if (!this.atLineStart) {
        out.push(chunk.subarray(pos, lineEnd));
        this.atLineStart = newline !== -1;
      } else {
        const line = Buffer.concat([this.held, chunk.subarray(pos, lineEnd)]);
        this.held = Buffer.alloc(0);
        const verdict = this.judge(line);
        if (verdict === 'drop') this.dropping = newline === -1;
        else if (verdict === 'undecided' && newline === -1) this.held = line;
        else {
          out.push(line);
          this.atLineStart = newline !== -1;
        }
      }
      pos = lineEnd;
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  end(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    return rest;
  }

  /** A line (or its first bytes so far) against the starts: dropped, kept, or too short to tell. */
  private judge(line: Buffer): 'drop' | 'keep' | 'undecided' {
    let undecided = false;
    for (const start of this.starts) {
      if (line.length >= start.length) {
        if (line.subarray(0, start.length).equals(start)) return 'drop';
      } else if (start.subarray(0, line.length).equals(line)) undecided = true;
    }
    return undecided ? 'undecided' : 'keep';
  }
}

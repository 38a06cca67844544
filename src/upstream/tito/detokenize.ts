/**
 * Sampled ids to text, incrementally: a UTF-8 character split across tokens is held back until
 * its last byte arrives, and each piece is decoded with the previous piece's ids as left context so tokenizers
 * whose decoders look at neighbours (a leading-space rule) give the same text as decoding all at
 * once (the method vLLM's incremental detokenizer uses).
 */
export class IncrementalDetokenizer {
  private readonly ids: number[] = [];
  /** ids[prefix..read) were decoded already; ids[read..] are waiting for complete characters. */
  private prefix = 0;
  private read = 0;

  constructor(private readonly decode: (ids: readonly number[]) => string) {}

  push(ids: readonly number[]): string {
    for (const id of ids) this.ids.push(id);
    return this.take(false);
  }

  /** The end of the output: whatever is held back is given out as it decodes. */
  end(): string {
    return this.take(true);
  }

  private take(final: boolean): string {
    if (this.read === this.ids.length) return '';
    const before = this.prefix < this.read ? this.decode(this.ids.slice(this.prefix, this.read)) : '';
    const after = this.decode(this.ids.slice(this.prefix));
    if (!final && after.endsWith('\uFFFD')) return '';
    const piece = after.slice(before.length);
    this.prefix = this.read;
    this.read = this.ids.length;
    return piece;
  }
}

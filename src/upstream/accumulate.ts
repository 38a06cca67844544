import type { CapturedTokens, TokenDelta, TokenIds, TokenSource } from '../core/tokens.js';

/** Joins the token data of a streamed reply, chunk by chunk, without altering a value. */
export class TokenAccumulator {
  private promptIds: TokenIds | null = null;
  private sampledIds: number[] | null = null;
  private logprobs: number[] | null = null;

  constructor(private readonly source: TokenSource) {}

  add(delta: TokenDelta | null): void {
    if (!delta) return;
    // vLLM sends the prompt ids once, on the first chunk; a second copy would be a server bug,
    // and the first one is what the model saw.
    if (delta.promptIds && !this.promptIds) this.promptIds = delta.promptIds;
    if (delta.sampledIds) {
      if (!this.sampledIds) this.sampledIds = [];
      for (const id of delta.sampledIds) this.sampledIds.push(id);
    }
    if (delta.logprobs) {
      if (!this.logprobs) this.logprobs = [];
      for (const lp of delta.logprobs) this.logprobs.push(lp);
    }
  }

  /** `none` when the server sent no ids at all (e.g. a vLLM that ignores `return_token_ids`). */
  result(): CapturedTokens {
    if (this.source === 'none' || (!this.promptIds && !this.sampledIds)) {
      return { source: 'none', promptIds: null, sampledIds: null, logprobs: null };
    }
    return {
      source: this.source,
      promptIds: this.promptIds,
      sampledIds: this.sampledIds ?? (this.promptIds ? [] : null),
      logprobs: this.logprobs ?? (this.promptIds ? [] : null),
    };
  }
}

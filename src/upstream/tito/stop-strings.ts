/**
 * Harness stop strings, applied to the text polar decodes itself (the servers trim them only from
 * their own text output): the last (longest stop) characters are held back while streaming, so
 * a stop string split across pieces is never shown, and at the end the text is cut where the stop
 * string the server matched begins — what vLLM's chat endpoint returns.
 */
export class StopStringTrimmer {
  private held = '';
  private readonly keep: number;

  constructor(stops: readonly string[]) {
    // The whole longest stop string, not one less: the piece that completes it may come before
    // the one that says the reply finished.
    this.keep = stops.length > 0 ? Math.max(...stops.map((s) => s.length)) : 0;
  }

  push(text: string): string {
    if (this.keep === 0 || !text) return text;
    const all = this.held + text;
    let cut = Math.max(0, all.length - this.keep);
    // Never split a surrogate pair: half a character would reach the harness as its own string.
    if (cut > 0 && isHighSurrogate(all.charCodeAt(cut - 1))) cut--;
    this.held = all.slice(cut);
    return all.slice(0, cut);
  }

  /** The held text and the output's last `text`, cut at `matched` (the stop string the server reports), when it is there. */
  end(text: string, matched: string | null): string {
    const rest = this.held + text;
    this.held = '';
    if (matched) {
      const at = rest.indexOf(matched);
      if (at >= 0) return rest.slice(0, at);
    }
    return rest;
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

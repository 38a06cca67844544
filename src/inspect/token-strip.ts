import type { TokenText, Trajectory } from '../trajectory/types.js';

/**
 * A token strip: the ids of one call or one trace in order, each marked as prompt (what the model
 * was given), sampled (what it produced, trainable, with the logprob it had) or context (tokens
 * between turns inside a merged trace: in the sequence but masked out of the loss).
 */
export type TokenKind = 'prompt' | 'sampled' | 'context';

export interface StripToken {
  id: number;
  kind: TokenKind;
  /** The sampling logprob, for sampled tokens whose server returned one. */
  logprob: number | null;
}

export function callStrip(promptIds: readonly number[], sampledIds: readonly number[], logprobs: readonly number[] | null, from = 0): StripToken[] {
  const out: StripToken[] = [];
  for (let i = from; i < promptIds.length; i++) out.push({ id: promptIds[i]!, kind: 'prompt', logprob: null });
  sampledIds.forEach((id, i) => out.push({ id, kind: 'sampled', logprob: logprobs?.[i] ?? null }));
  return out;
}

/** A merged trace: its prompt, then its response where the loss mask says which tokens were sampled. */
export function traceStrip(trace: Pick<Trajectory, 'prompt_ids' | 'response_ids' | 'loss_mask' | 'response_logprobs'>): StripToken[] {
  const out: StripToken[] = trace.prompt_ids.map((id) => ({ id, kind: 'prompt' as const, logprob: null }));
  trace.response_ids.forEach((id, i) => {
    const sampled = trace.loss_mask[i] === 1;
    out.push({ id, kind: sampled ? 'sampled' : 'context', logprob: sampled ? (trace.response_logprobs?.[i] ?? null) : null });
  });
  return out;
}

/**
 * Logprob as a band from 0 (the model was sure: p ≥ 0.9) to 4 (p < 0.01); null where there is none.
 * Both the terminal browser and the HTML report colour sampled tokens by it.
 */
export const BAND_FLOORS = [Math.log(0.9), Math.log(0.5), Math.log(0.1), Math.log(0.01)] as const;
export const BAND_LABELS = ['p ≥ 0.9', 'p ≥ 0.5', 'p ≥ 0.1', 'p ≥ 0.01', 'p < 0.01'] as const;

export function logprobBand(logprob: number | null): 0 | 1 | 2 | 3 | 4 | null {
  if (logprob === null || Number.isNaN(logprob)) return null;
  for (let band = 0; band < BAND_FLOORS.length; band++) if (logprob >= BAND_FLOORS[band]!) return band as 0 | 1 | 2 | 3;
  return 4;
}

/**
 * Each token's own text, decoded one id at a time (cached), so that boundaries are exact; without a
 * tokenizer a token shows as its id. Display only: nothing here feeds training data.
 */
export class TokenPieces {
  private readonly cache = new Map<number, string>();
  constructor(readonly text?: TokenText) {}

  piece(id: number): string {
    let s = this.cache.get(id);
    if (s === undefined) {
      s = this.text ? (this.text.piece ? this.text.piece(id) : this.text.decode([id])) : `⟨${id}⟩`;
      this.cache.set(id, s);
    }
    return s;
  }

  special(id: number): boolean {
    return this.text?.isSpecial(id) ?? false;
  }
}

/** A token's text made visible on one line: newlines as ↵, tabs as →, other control characters as \xNN. */
export function visible(piece: string): string {
  return piece.replace(/[\u0000-\u001f\u007f]/g, (c) =>
    c === '\n' ? '↵' : c === '\t' ? '→' : c === '\r' ? '␍' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

export interface StripSegment {
  /** Index into the strip. */
  index: number;
  text: string;
}

/**
 * A strip laid out in lines of at most `width` characters for a terminal: tokens stay whole unless
 * one is wider than a line, and a line ends after every token that holds a newline. With `boundary`,
 * every token but the first starts with it, so each split is visible.
 */
export function layoutStrip(strip: readonly StripToken[], pieces: TokenPieces, width: number, boundary = ''): StripSegment[][] {
  const lines: StripSegment[][] = [];
  let line: StripSegment[] = [];
  let used = 0;
  const flush = () => {
    lines.push(line);
    line = [];
    used = 0;
  };
  strip.forEach((token, index) => {
    const raw = pieces.piece(token.id);
    let text = (index > 0 ? boundary : '') + (visible(raw) || '∅');
    while (text.length > 0) {
      if (used > 0 && used + text.length > width) flush();
      const take = text.slice(0, width - used);
      line.push({ index, text: take });
      used += take.length;
      text = text.slice(take.length);
      if (text.length > 0) flush();
    }
    if (raw.includes('\n')) flush();
  });
  if (line.length > 0 || lines.length === 0) lines.push(line);
  return lines;
}

/** Lines whose text contains `query` (case-insensitive), in order. */
export function searchLines(lines: readonly StripSegment[][], query: string): number[] {
  const q = query.toLowerCase();
  if (!q) return [];
  const hits: number[] = [];
  lines.forEach((line, i) => {
    if (
      line
        .map((s) => s.text)
        .join('')
        .toLowerCase()
        .includes(q)
    )
      hits.push(i);
  });
  return hits;
}

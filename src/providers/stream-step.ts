import type { ChatCompletionChunk } from '../core/chat.js';
import type { TokenDelta } from '../core/tokens.js';

/**
 * What the stream reader (stream-events.ts) hands every provider's translator (types.ts): kept in a
 * file of its own so the reader and the codec interface both import it and neither imports the other.
 */

/**
 * Canonical chunks as provider-neutral events, in order. vLLM's chunks come in many shapes
 * (`delta: {}` carrying only token ids, `"tool_calls": []` on content deltas, `"content": null` on
 * tool deltas, a usage chunk with `choices: []`, reasoning under `reasoning` or
 * `reasoning_content`); stream-events.ts is the one place that reads them, so every provider's
 * translator sees the same clean sequence.
 */
export type StreamEvent =
  | { kind: 'reasoning'; text: string }
  | { kind: 'text'; text: string }
  | { kind: 'tool-start'; index: number; id: string; name: string }
  | { kind: 'tool-args'; index: number; text: string }
  | { kind: 'finish'; reason: string; stopReason: string | number | null };

/** Token counts of a stream so far: captured ids when present, else the server's usage chunk. */
export interface StreamCounts {
  promptTokens: number;
  completionTokens: number;
}

/**
 * One upstream chunk, read once (stream-events.ts): the chunk, its token data, the provider-neutral
 * events it holds (tool-call ids already minted), and the counts so far. The proxy hands the same
 * step to the codec's translator and to the call's recorder.
 */
export interface StreamStep {
  chunk: ChatCompletionChunk;
  tokens: TokenDelta | null;
  events: readonly StreamEvent[];
  counts: StreamCounts;
}

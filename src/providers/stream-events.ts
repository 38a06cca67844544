import type { ChatCompletionChunk, ChatUsage } from '../core/chat.js';
import type { TokenDelta } from '../core/tokens.js';
import type { StreamCounts, StreamEvent, StreamStep } from './stream-step.js';

/**
 * Reads canonical chunks into provider-neutral events (stream-step.ts), in order. vLLM's chunks come
 * in many shapes; this is the one place that reads them, so every provider's translator sees the
 * same clean sequence.
 */
export class StreamEventReader {
  /** Tool calls by the upstream's index: the position polar gave them and their id. */
  private readonly tools = new Map<number, { id: string; name: string }>();
  promptTokens: number | null = null;
  completionTokens = 0;
  usage: ChatUsage | null = null;

  constructor(private readonly callId: string) {}

  read(chunk: ChatCompletionChunk, tokens: TokenDelta | null): StreamEvent[] {
    if (tokens?.promptIds && this.promptTokens === null) this.promptTokens = tokens.promptIds.length;
    if (tokens?.sampledIds) this.completionTokens += tokens.sampledIds.length;
    if (chunk.usage) this.usage = chunk.usage;
    const events: StreamEvent[] = [];
    const choice = chunk.choices[0];
    if (!choice) return events;
    const delta = choice.delta ?? {};
    const reasoning = delta.reasoning_content ?? (delta.reasoning as string | null | undefined);
    if (typeof reasoning === 'string' && reasoning.length > 0) events.push({ kind: 'reasoning', text: reasoning });
    if (typeof delta.content === 'string' && delta.content.length > 0) events.push({ kind: 'text', text: delta.content });
    for (const call of delta.tool_calls ?? []) {
      const index = typeof call.index === 'number' ? call.index : this.tools.size;
      let known = this.tools.get(index);
      if (!known) {
        known = { id: call.id || `call_${this.callId}_${index}`, name: call.function?.name ?? '' };
        this.tools.set(index, known);
        events.push({ kind: 'tool-start', index, id: known.id, name: known.name });
      }
      const args = call.function?.arguments;
      if (typeof args === 'string' && args.length > 0) events.push({ kind: 'tool-args', index, text: args });
    }
    if (choice.finish_reason) {
      events.push({ kind: 'finish', reason: choice.finish_reason, stopReason: (choice.stop_reason as string | number | null | undefined) ?? null });
    }
    return events;
  }

  /** Reads one chunk into the step the translator and the recorder share. */
  step(chunk: ChatCompletionChunk, tokens: TokenDelta | null): StreamStep {
    const events = this.read(chunk, tokens);
    return { chunk, tokens, events, counts: this.counts() };
  }

  /** Token counts so far: captured ids when present, else the server's usage chunk. */
  counts(): StreamCounts {
    return {
      promptTokens: this.promptTokens ?? this.usage?.prompt_tokens ?? 0,
      completionTokens: this.completionTokens || (this.usage?.completion_tokens ?? 0),
    };
  }
}

import type { ChatCompletionChunk, ChatMessage } from '../core/chat.js';

/**
 * The reply as one canonical assistant message, assembled from a stream's chunks (or taken from a
 * completion): what training exports need, in the same shape whatever API the harness spoke.
 */
export class AssistantMessageBuilder {
  private content = '';
  private reasoning = '';
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();

  add(chunk: ChatCompletionChunk): void {
    const delta = chunk.choices[0]?.delta;
    if (!delta) return;
    if (typeof delta.content === 'string') this.content += delta.content;
    const reasoning = delta.reasoning_content ?? (delta.reasoning as string | null | undefined);
    if (typeof reasoning === 'string') this.reasoning += reasoning;
    for (const call of delta.tool_calls ?? []) {
      const index = typeof call.index === 'number' ? call.index : this.calls.size;
      const known = this.calls.get(index) ?? { id: '', name: '', arguments: '' };
      if (call.id) known.id = call.id;
      if (call.function?.name) known.name += call.function.name;
      if (call.function?.arguments) known.arguments += call.function.arguments;
      this.calls.set(index, known);
    }
  }

  build(): ChatMessage {
    const message: ChatMessage = { role: 'assistant', content: this.content };
    if (this.reasoning) message.reasoning_content = this.reasoning;
    if (this.calls.size > 0) {
      message.tool_calls = [...this.calls.values()].map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    }
    return message;
  }
}

/** The canonical assistant message of a non-streaming completion. */
export function assistantMessageOf(message: ChatMessage | undefined): ChatMessage | null {
  if (!message) return null;
  const out: ChatMessage = { role: 'assistant', content: typeof message.content === 'string' ? message.content : '' };
  if (typeof message.reasoning_content === 'string' && message.reasoning_content) out.reasoning_content = message.reasoning_content;
  if (message.tool_calls && message.tool_calls.length > 0) out.tool_calls = message.tool_calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } }));
  return out;
}

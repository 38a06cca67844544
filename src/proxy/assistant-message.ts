import type { ChatMessage } from '../core/chat.js';
import type { ReplyView } from '../providers/reply-view.js';
import type { StreamEvent } from '../providers/stream-events.js';

/**
 * The reply as one canonical assistant message (content, reasoning, tool calls): what training
 * exports need, in the same shape whatever API the harness spoke. Built from the same reply view and
 * stream events the codecs encode from, so its tool-call ids are the ones the harness received.
 */
export class AssistantMessageBuilder {
  private content = '';
  private reasoning = '';
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();

  add(events: readonly StreamEvent[]): void {
    for (const e of events) {
      if (e.kind === 'text') this.content += e.text;
      else if (e.kind === 'reasoning') this.reasoning += e.text;
      else if (e.kind === 'tool-start') this.calls.set(e.index, { id: e.id, name: e.name, arguments: '' });
      else if (e.kind === 'tool-args') {
        const call = this.calls.get(e.index);
        if (call) call.arguments += e.text;
      }
    }
  }

  build(): ChatMessage {
    return assistantMessage(this.content, this.reasoning, [...this.calls.values()]);
  }
}

/** The canonical assistant message of a non-streaming reply. */
export function assistantMessageOf(view: ReplyView): ChatMessage {
  return assistantMessage(view.text ?? '', view.reasoning ?? '', view.toolCalls);
}

function assistantMessage(content: string, reasoning: string, calls: readonly { id: string; name: string; arguments: string }[]): ChatMessage {
  const message: ChatMessage = { role: 'assistant', content };
  if (reasoning) message.reasoning_content = reasoning;
  if (calls.length > 0) message.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  return message;
}

import type { ChatMessage } from '../core/chat.js';
import type { ReplyView } from '../providers/reply-view.js';

/**
 * The reply as one canonical assistant message (content, reasoning, tool calls): what training
 * exports need, in the same shape whatever API the harness spoke. Streams are gathered by
 * StreamCollector from the same steps the codecs encode from; this is the non-streaming form, built
 * from the same reply view, so its tool-call ids are the ones the harness received.
 */
export function assistantMessageOf(view: ReplyView): ChatMessage {
  return assistantMessage(view.text ?? '', view.reasoning ?? '', view.toolCalls);
}

export function assistantMessage(content: string, reasoning: string, calls: readonly { id: string; name: string; arguments: string }[]): ChatMessage {
  const message: ChatMessage = { role: 'assistant', content };
  if (reasoning) message.reasoning_content = reasoning;
  if (calls.length > 0) message.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  return message;
}

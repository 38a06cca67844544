import { isRecord, type ChatMessage } from '../../core/chat.js';
import type { RequestRecord } from '../../store/requests.js';
import { callConversation, isConversation, type ResponseLookup } from '../conversation.js';

/** One supervised example in NeMo-RL's `openai_format`: the conversation and the tools offered. */
export interface SftExample {
  messages: unknown[];
  tools: unknown[];
}

/**
 * A trace's last call holds the whole conversation as the harness sent it (conversation.ts) plus
 * the reply it got (recorded as a canonical assistant message): together, the chain as one
 * example. Content-part lists of text only are joined the way vLLM's chat endpoint joins them for
 * a template (`"\n"`): the Qwen3 template, among others, renders non-string content as nothing, so
 * a trainer applying it would otherwise drop the prompt. Lists that hold images stay lists.
 */
export function sftExample(lastCall: RequestRecord, lookup?: ResponseLookup): SftExample | { problem: string } {
  if (!isRecord(lastCall.assistantMessage)) return { problem: 'no reply recorded as an assistant message (recorded before polar kept them)' };
  const conversation = callConversation(lastCall, lookup);
  if (!isConversation(conversation)) return conversation;
  return {
    messages: [...conversation.messages, lastCall.assistantMessage as ChatMessage].map(joinTextParts),
    tools: conversation.tools,
  };
}

/** A message whose content is a list of text parts only, with that text as one string. */
export function joinTextParts(message: ChatMessage): ChatMessage {
  const parts = message.content;
  if (!Array.isArray(parts) || !parts.every(isTextPart)) return message;
  return { ...message, content: parts.map((p) => p.text).join('\n') };
}

function isTextPart(part: unknown): part is { type: 'text'; text: string } {
  return isRecord(part) && part.type === 'text' && typeof part.text === 'string';
}

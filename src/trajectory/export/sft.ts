import { isRecord, type ChatMessage, type ChatToolCall } from '../../core/chat.js';
import type { RequestRecord } from '../../store/requests.js';
import { callConversation, isConversation, type ResponseLookup } from '../conversation.js';

/** One supervised example in NeMo-RL's `openai_format`: the conversation and the tools offered. */
export interface SftExample {
  messages: ChatMessage[];
  tools: unknown[];
}

/**
 * A trace's last call holds the whole conversation as the harness sent it (conversation.ts) plus
 * the reply it got (recorded as a canonical assistant message): together, the chain as one
 * example. Content-part lists of text only are joined the way vLLM's chat endpoint joins them for
 * a template (`"\n"`): the Qwen3 template, among others, renders non-string content as nothing, so
 * a trainer applying it would otherwise drop the prompt. Lists that hold images stay lists.
 *
 * What NeMo-RL reads (`7ea279a`): `openai_format` takes `messages` and `tools` from each line
 * (nemo_rl/data/datasets/response_datasets/oai_format_dataset.py:188, :197-198) and asserts the last
 * message is the assistant's (:193); `sft_processor` hands `tools` on (nemo_rl/data/processors.py:166)
 * and every message dict, whole, to the tokenizer's chat template (nemo_rl/data/llm_message_utils.py:565-567),
 * then copies it into the training batch beside its `token_ids` (:635-640). So each message keeps only
 * the chat fields a template reads — role, content, tool calls, tool_call_id, name, and the reasoning
 * as `reasoning_content` (the name Qwen3-style templates read) — and none of what an upstream request
 * carried for the server: NeMo-RL's pinned `prompt_token_ids` / `generation_token_ids` /
 * `generation_log_probs` (upstream/nemo-rl), or the copy of the reasoning under vLLM's `reasoning`.
 */
export function sftExample(lastCall: RequestRecord, lookup?: ResponseLookup): SftExample | { problem: string } {
  if (!isRecord(lastCall.assistantMessage)) return { problem: 'no reply recorded as an assistant message (recorded before polar kept them)' };
  const conversation = callConversation(lastCall, lookup);
  if (!isConversation(conversation)) return conversation;
  return {
    messages: [...conversation.messages, lastCall.assistantMessage as ChatMessage].map((m) => chatFields(joinTextParts(m))),
    tools: conversation.tools,
  };
}

/** A message whose content is a list of text parts only, with that text as one string. */
export function joinTextParts(message: ChatMessage): ChatMessage {
  const parts = message.content;
  if (!Array.isArray(parts) || !parts.every(isTextPart)) return message;
  return { ...message, content: parts.map((p) => p.text).join('\n') };
}

/**
 * The message as a chat template reads it: role, content, tool calls (id, type, function name and
 * arguments), tool_call_id, name, and the reasoning once, as `reasoning_content` (taken from vLLM's
 * `reasoning` when only that is set). Everything else is left out.
 */
export function chatFields(message: ChatMessage): ChatMessage {
  const out: ChatMessage = { role: message.role };
  if ('content' in message) out.content = message.content ?? null;
  const reasoning =
    typeof message.reasoning_content === 'string' ? message.reasoning_content : typeof message.reasoning === 'string' ? message.reasoning : null;
  if (reasoning) out.reasoning_content = reasoning;
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) out.tool_calls = message.tool_calls.map(toolCallFields);
  if (typeof message.tool_call_id === 'string') out.tool_call_id = message.tool_call_id;
  if (typeof message.name === 'string') out.name = message.name;
  return out;
}

function toolCallFields(call: ChatToolCall): ChatToolCall {
  return { ...(call.id !== undefined ? { id: call.id } : {}), type: 'function', function: { name: call.function.name, arguments: call.function.arguments } };
}

function isTextPart(part: unknown): part is { type: 'text'; text: string } {
  return isRecord(part) && part.type === 'text' && typeof part.text === 'string';
}

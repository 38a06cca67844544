import type { ChatCompletion, ReplyRequest } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import { parseArguments, replyView } from '../reply-view.js';
import type { EncodeContext } from '../types.js';
import { thinkingSignature } from './thinking-signature.js';
import type { AnthropicCodecState } from './types.js';

export type AnthropicStopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'refusal';

export function messageId(ctx: EncodeContext): string {
  return `msg_${ctx.callId.replace(/^req_/, '')}`;
}

/** OpenAI finish reasons in Anthropic's terms; a stop caused by one of the caller's stop sequences is `stop_sequence`. */
export function stopReason(finish: string | null, stop: string | number | null, req: ReplyRequest): { reason: AnthropicStopReason; sequence: string | null } {
  const state = req.codecState as AnthropicCodecState | undefined;
  if (finish === 'tool_calls') return { reason: 'tool_use', sequence: null };
  if (finish === 'length') return { reason: 'max_tokens', sequence: null };
  if (finish === 'content_filter') return { reason: 'refusal', sequence: null };
  if (typeof stop === 'string' && state?.stopSequences.includes(stop)) return { reason: 'stop_sequence', sequence: stop };
  return { reason: 'end_turn', sequence: null };
}

export function usageBlock(promptTokens: number, completionTokens: number) {
  return { input_tokens: promptTokens, output_tokens: completionTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

/** A finished completion as an Anthropic `message`: thinking, then text, then tool_use blocks. */
export function encodeAnthropicResponse(done: ChatCompletion, req: ReplyRequest, tokens: CapturedTokens, ctx: EncodeContext) {
  const view = replyView(done, tokens, ctx.callId);
  const content: unknown[] = [];
  if (view.reasoning !== null) content.push({ type: 'thinking', thinking: view.reasoning, signature: thinkingSignature(view.reasoning) });
  if (view.text) content.push({ type: 'text', text: view.text });
  for (const call of view.toolCalls) content.push({ type: 'tool_use', id: call.id, name: call.name, input: parseArguments(call.arguments) });
  if (content.length === 0) content.push({ type: 'text', text: '' });
  const { reason, sequence } = stopReason(view.finishReason, view.stopReason, req);
  return {
    id: messageId(ctx),
    type: 'message',
    role: 'assistant',
    model: req.requestedModel || done.model,
    content,
    stop_reason: reason,
    stop_sequence: sequence,
    usage: usageBlock(view.promptTokens, view.completionTokens),
  };
}

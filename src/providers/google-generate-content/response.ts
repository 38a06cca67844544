import type { ChatCompletion, ReplyRequest } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import { parseArguments, replyView } from '../reply-view.js';
import type { EncodeContext } from '../types.js';
import type { GeminiCodecState } from './types.js';

export function finishReason(finish: string | null): string {
  if (finish === 'length') return 'MAX_TOKENS';
  if (finish === 'content_filter') return 'SAFETY';
  return 'STOP';
}

export function usageMetadata(promptTokens: number, completionTokens: number) {
  return { promptTokenCount: promptTokens, candidatesTokenCount: completionTokens, totalTokenCount: promptTokens + completionTokens };
}

export function functionCallPart(call: { id: string; name: string; arguments: string }) {
  return { functionCall: { id: call.id, name: call.name, args: parseArguments(call.arguments) } };
}

export function encodeGeminiResponse(done: ChatCompletion, req: ReplyRequest, tokens: CapturedTokens, ctx: EncodeContext) {
  const view = replyView(done, tokens, ctx.callId);
  const parts: unknown[] = [];
  if (view.reasoning !== null && (req.codecState as GeminiCodecState).includeThoughts) parts.push({ text: view.reasoning, thought: true });
  if (view.text) parts.push({ text: view.text });
  for (const call of view.toolCalls) parts.push(functionCallPart(call));
  return {
    candidates: [{ content: { role: 'model', parts }, finishReason: finishReason(view.finishReason), index: 0 }],
    usageMetadata: usageMetadata(view.promptTokens, view.completionTokens),
    modelVersion: req.requestedModel,
    responseId: ctx.callId,
  };
}

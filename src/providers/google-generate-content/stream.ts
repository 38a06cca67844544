import type { ReplyRequest } from '../../core/chat.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseComment } from '../../core/sse/write.js';
import type { EncodeContext, StreamTranslator } from '../types.js';
import { geminiError } from './errors.js';
import { finishReason, functionCallPart, usageMetadata } from './response.js';
import type { GeminiCodecState } from './types.js';

/**
 * `streamGenerateContent?alt=sse`: one `data:` frame per upstream chunk with the new text (and, when
 * asked for, thought) parts; function calls are sent whole, since Gemini's `args` is an object, not
 * a string that can arrive in pieces; the last frame carries `finishReason` and `usageMetadata`
 * (Gemini CLI treats a stream without a finish reason as broken and retries it).
 * `@google/genai` reads only `data:` events, so a comment line is a safe keep-alive; it raises a
 * mid-stream error only when a chunk is a bare `{"error": …}` JSON object, so errors go out that way.
 */
export function createGeminiStream(req: ReplyRequest, ctx: EncodeContext): StreamTranslator {
  const includeThoughts = (req.codecState as GeminiCodecState).includeThoughts;
  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  let finish: string | null = null;
  const frame = (parts: unknown[], candidate: Record<string, unknown> = {}, top: Record<string, unknown> = {}): SseEvent => ({
    data: JSON.stringify({
      candidates: [{ content: { role: 'model', parts }, index: 0, ...candidate }],
      ...top,
      modelVersion: req.requestedModel,
      responseId: ctx.callId,
    }),
  });
  return {
    push({ events }) {
      const parts: unknown[] = [];
      for (const e of events) {
        if (e.kind === 'reasoning' && includeThoughts) parts.push({ text: e.text, thought: true });
        else if (e.kind === 'text') parts.push({ text: e.text });
        else if (e.kind === 'tool-start') calls.set(e.index, { id: e.id, name: e.name, arguments: '' });
        else if (e.kind === 'tool-args') {
          const call = calls.get(e.index);
          if (call) call.arguments += e.text;
        } else if (e.kind === 'finish') finish = e.reason;
      }
      return parts.length > 0 ? [frame(parts)] : [];
    },
    end({ promptTokens, completionTokens }) {
      const parts = [...calls.values()].map(functionCallPart);
      return [frame(parts, { finishReason: finishReason(finish) }, { usageMetadata: usageMetadata(promptTokens, completionTokens) })];
    },
    error(err) {
      // Not an SSE event: a bare JSON object is what @google/genai recognises as a stream error.
      return `${JSON.stringify(geminiError(err))}\n\n`;
    },
    keepAlive() {
      return formatSseComment('keep-alive');
    },
  };
}

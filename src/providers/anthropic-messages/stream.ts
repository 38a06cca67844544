import type { ReplyRequest } from '../../core/chat.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseEvent } from '../../core/sse/write.js';
import type { StreamCounts } from '../stream-step.js';
import type { EncodeContext, StreamTranslator } from '../types.js';
import { anthropicError } from './errors.js';
import { messageId, stopReason, usageBlock } from './response.js';
import { thinkingSignature } from './thinking-signature.js';

type OpenBlock = { kind: 'thinking'; index: number; text: string } | { kind: 'text'; index: number } | { kind: 'tool'; index: number; upstreamIndex: number };

/**
 * Anthropic's streaming sequence, produced as upstream chunks arrive (docs.anthropic.com,
 * "Streaming Messages"): `message_start`; per content block `content_block_start`, its deltas
 * (`thinking_delta` then one `signature_delta`, `text_delta`, or `input_json_delta`) and
 * `content_block_stop`; then `message_delta` (stop reason, cumulative usage) and `message_stop`.
 * Claude Code rejects a delta whose index has no open block, so blocks open and close strictly in
 * order; parallel tool calls arrive one after another and get consecutive indexes.
 */
export function createAnthropicStream(req: ReplyRequest, ctx: EncodeContext): StreamTranslator {
  let started = false;
  let open: OpenBlock | null = null;
  let nextIndex = 0;
  let finish: { reason: string; stopReason: string | number | null } | null = null;
  const event = (type: string, data: Record<string, unknown>): SseEvent => ({ event: type, data: JSON.stringify({ type, ...data }) });

  const close = (out: SseEvent[]) => {
    if (!open) return;
    if (open.kind === 'thinking') {
      out.push(event('content_block_delta', { index: open.index, delta: { type: 'signature_delta', signature: thinkingSignature(open.text) } }));
    }
    out.push(event('content_block_stop', { index: open.index }));
    open = null;
  };
  const start = (out: SseEvent[], counts: StreamCounts) => {
    if (started) return;
    started = true;
    out.push(
      event('message_start', {
        message: {
          id: messageId(ctx),
          type: 'message',
          role: 'assistant',
          model: req.requestedModel,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: usageBlock(counts.promptTokens, 0),
        },
      }),
    );
  };

  return {
    push({ events, counts }) {
      const out: SseEvent[] = [];
      start(out, counts);
      for (const e of events) {
        if (e.kind === 'reasoning') {
          if (open?.kind !== 'thinking') {
            close(out);
            open = { kind: 'thinking', index: nextIndex++, text: '' };
            out.push(event('content_block_start', { index: open.index, content_block: { type: 'thinking', thinking: '', signature: '' } }));
          }
          open.text += e.text;
          out.push(event('content_block_delta', { index: open.index, delta: { type: 'thinking_delta', thinking: e.text } }));
        } else if (e.kind === 'text') {
          if (open?.kind !== 'text') {
            close(out);
            open = { kind: 'text', index: nextIndex++ };
            out.push(event('content_block_start', { index: open.index, content_block: { type: 'text', text: '' } }));
          }
          out.push(event('content_block_delta', { index: open.index, delta: { type: 'text_delta', text: e.text } }));
        } else if (e.kind === 'tool-start') {
          close(out);
          open = { kind: 'tool', index: nextIndex++, upstreamIndex: e.index };
          out.push(event('content_block_start', { index: open.index, content_block: { type: 'tool_use', id: e.id, name: e.name, input: {} } }));
        } else if (e.kind === 'tool-args') {
          if (open?.kind === 'tool' && open.upstreamIndex === e.index) {
            out.push(event('content_block_delta', { index: open.index, delta: { type: 'input_json_delta', partial_json: e.text } }));
          }
          // Arguments for a call that is no longer open cannot be placed; vLLM sends each call whole in turn.
        } else {
          finish = { reason: e.reason, stopReason: e.stopReason };
        }
      }
      return out;
    },
    end(counts) {
      const out: SseEvent[] = [];
      start(out, counts);
      if (nextIndex === 0) {
        // A reply with no content still gets one (empty) text block; clients index content[0].
        open = { kind: 'text', index: nextIndex++ };
        out.push(event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
      }
      close(out);
      const { reason, sequence } = stopReason(finish?.reason ?? 'stop', finish?.stopReason ?? null, req);
      out.push(event('message_delta', { delta: { stop_reason: reason, stop_sequence: sequence }, usage: { output_tokens: counts.completionTokens } }));
      out.push(event('message_stop', {}));
      return out;
    },
    error(err) {
      return formatSseEvent({ event: 'error', data: JSON.stringify(anthropicError(err)) });
    },
    keepAlive() {
      return formatSseEvent(event('ping', {}));
    },
  };
}

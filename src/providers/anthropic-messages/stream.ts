import type { ReplyRequest } from '../../core/chat.js';
import type { PolarError } from '../../core/errors.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseEvent } from '../../core/sse/write.js';
import type { StreamCounts, StreamStep } from '../stream-step.js';
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
  return new AnthropicStream(req, ctx);
}

/** One call's Anthropic stream: the one open content block, and the index the next one gets. */
class AnthropicStream implements StreamTranslator {
  private started = false;
  private open: OpenBlock | null = null;
  private nextIndex = 0;
  private finish: { reason: string; stopReason: string | number | null } | null = null;

  constructor(
    private readonly req: ReplyRequest,
    private readonly ctx: EncodeContext,
  ) {}

  push({ events, counts }: StreamStep): SseEvent[] {
    const out: SseEvent[] = [];
    this.start(out, counts);
    for (const e of events) {
      if (e.kind === 'reasoning') this.thinking(out, e.text);
      else if (e.kind === 'text') this.text(out, e.text);
      else if (e.kind === 'tool-start') this.toolStart(out, e);
      else if (e.kind === 'tool-args') this.toolArgs(out, e);
      else this.finish = { reason: e.reason, stopReason: e.stopReason };
    }
    return out;
  }

  end(counts: StreamCounts): SseEvent[] {
    const out: SseEvent[] = [];
    this.start(out, counts);
    if (this.nextIndex === 0) {
      // A reply with no content still gets one (empty) text block; clients index content[0].
      this.open = { kind: 'text', index: this.nextIndex++ };
      out.push(event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
    }
    this.close(out);
    const { reason, sequence } = stopReason(this.finish?.reason ?? 'stop', this.finish?.stopReason ?? null, this.req);
    out.push(event('message_delta', { delta: { stop_reason: reason, stop_sequence: sequence }, usage: { output_tokens: counts.completionTokens } }));
    out.push(event('message_stop', {}));
    return out;
  }

  error(err: PolarError): string {
    return formatSseEvent({ event: 'error', data: JSON.stringify(anthropicError(err)) });
  }

  keepAlive(): string {
    return formatSseEvent(event('ping', {}));
  }

  private start(out: SseEvent[], counts: StreamCounts): void {
    if (this.started) return;
    this.started = true;
    out.push(
      event('message_start', {
        message: {
          id: messageId(this.ctx),
          type: 'message',
          role: 'assistant',
          model: this.req.requestedModel,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: usageBlock(counts.promptTokens, 0),
        },
      }),
    );
  }

  private thinking(out: SseEvent[], text: string): void {
    let open = this.open;
    if (open?.kind !== 'thinking') {
      this.close(out);
      open = this.open = { kind: 'thinking', index: this.nextIndex++, text: '' };
      out.push(event('content_block_start', { index: open.index, content_block: { type: 'thinking', thinking: '', signature: '' } }));
    }
    open.text += text;
    out.push(deltaEvent(open.index, 'thinking_delta', 'thinking', text));
  }

  private text(out: SseEvent[], text: string): void {
    let open = this.open;
    if (open?.kind !== 'text') {
      this.close(out);
      open = this.open = { kind: 'text', index: this.nextIndex++ };
      out.push(event('content_block_start', { index: open.index, content_block: { type: 'text', text: '' } }));
    }
    out.push(deltaEvent(open.index, 'text_delta', 'text', text));
  }

  private toolStart(out: SseEvent[], e: { index: number; id: string; name: string }): void {
    this.close(out);
    this.open = { kind: 'tool', index: this.nextIndex++, upstreamIndex: e.index };
    out.push(event('content_block_start', { index: this.open.index, content_block: { type: 'tool_use', id: e.id, name: e.name, input: {} } }));
  }

  private toolArgs(out: SseEvent[], e: { index: number; text: string }): void {
    // Arguments for a call that is no longer open cannot be placed; vLLM sends each call whole in turn.
    if (this.open?.kind !== 'tool' || this.open.upstreamIndex !== e.index) return;
    out.push(event('content_block_delta', { index: this.open.index, delta: { type: 'input_json_delta', partial_json: e.text } }));
  }

  /** Closes the open block; a thinking block first gets its one signature. */
  private close(out: SseEvent[]): void {
    const open = this.open;
    if (!open) return;
    if (open.kind === 'thinking') {
      out.push(event('content_block_delta', { index: open.index, delta: { type: 'signature_delta', signature: thinkingSignature(open.text) } }));
    }
    out.push(event('content_block_stop', { index: open.index }));
    this.open = null;
  }
}

function event(type: string, data: Record<string, unknown>): SseEvent {
  return { event: type, data: JSON.stringify({ type, ...data }) };
}

/**
 * A text or thinking delta, the event sent once per token: written as text, the same bytes
 * `event('content_block_delta', { index, delta: { type, [field]: text } })` gives, without building
 * and walking three objects a token.
 */
function deltaEvent(index: number, type: 'text_delta' | 'thinking_delta', field: 'text' | 'thinking', text: string): SseEvent {
  return {
    event: 'content_block_delta',
    data: `{"type":"content_block_delta","index":${index},"delta":{"type":"${type}","${field}":${JSON.stringify(text)}}}`,
  };
}

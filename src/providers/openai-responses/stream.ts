import type { ReplyRequest } from '../../core/chat.js';
import type { PolarError } from '../../core/errors.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseEvent } from '../../core/sse/write.js';
import { openaiErrorBody } from '../openai-chat/errors.js';
import type { StreamCounts, StreamStep } from '../stream-step.js';
import type { EncodeContext, StreamTranslator } from '../types.js';
import { encodeReasoning } from './reasoning-content.js';
import { callItem, itemId, messageItem, responseObject, usageObject } from './response.js';
import type { ResponsesCodecState, ToolTarget } from './types.js';

type Open =
  | { kind: 'reasoning'; index: number; id: string; text: string }
  | { kind: 'message'; index: number; id: string; text: string }
  | { kind: 'tool'; index: number; id: string; upstreamIndex: number; call: { id: string; name: string; arguments: string }; target: ToolTarget | undefined };

/**
 * The Responses streaming sequence, produced as chunks arrive: `response.created`,
 * `response.in_progress`, then per output item `response.output_item.added`, its content events,
 * `response.output_item.done`; finally `response.completed` (or `response.incomplete` when the
 * output limit cut the reply) with the same items, the same ids, and usage. Codex drops text deltas
 * that arrive before their item's `output_item.added` and builds items from `output_item.done`, so
 * every item is opened before its deltas and closed before the next opens. Function-call arguments
 * stream as deltas; custom and shell calls carry structured input, so they are sent whole when done.
 * Every event has a `sequence_number`; keep-alives are `response.in_progress` events, since Codex's
 * idle timer counts events, not bytes.
 */
export function createResponsesStream(req: ReplyRequest, ctx: EncodeContext): StreamTranslator {
  return new ResponsesStream(req, ctx);
}

/** One call's Responses stream: the output items so far, the one open item, and the sequence number. */
class ResponsesStream implements StreamTranslator {
  private readonly targets: ResponsesCodecState['tools'];
  private readonly output: unknown[] = [];
  private seq = 0;
  private started = false;
  private open: Open | null = null;
  private finish: string | null = null;

  constructor(
    private readonly req: ReplyRequest,
    private readonly ctx: EncodeContext,
  ) {
    this.targets = (req.codecState as ResponsesCodecState).tools;
  }

  push({ events }: StreamStep): SseEvent[] {
    const out: SseEvent[] = [];
    this.start(out);
    for (const e of events) {
      if (e.kind === 'reasoning') this.reasoning(out, e.text);
      else if (e.kind === 'text') this.text(out, e.text);
      else if (e.kind === 'tool-start') this.toolStart(out, e);
      else if (e.kind === 'tool-args') this.toolArgs(out, e);
      else this.finish = e.reason;
    }
    return out;
  }

  end({ promptTokens, completionTokens }: StreamCounts): SseEvent[] {
    const out: SseEvent[] = [];
    this.start(out);
    this.close(out);
    const status = this.finish === 'length' ? 'incomplete' : 'completed';
    const response = responseObject(this.req, this.ctx, { status, output: this.output, usage: usageObject(promptTokens, completionTokens) });
    out.push(this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }));
    return out;
  }

  error(err: PolarError): string {
    const out: SseEvent[] = [];
    this.start(out);
    const { code, message } = openaiErrorBody(err).error;
    out.push(
      this.event('response.failed', { response: responseObject(this.req, this.ctx, { status: 'failed', output: this.output, error: { code, message } }) }),
    );
    return out.map(formatSseEvent).join('');
  }

  keepAlive(): string {
    const out: SseEvent[] = [];
    if (!this.started) this.start(out);
    else out.push(this.event('response.in_progress', { response: responseObject(this.req, this.ctx, { status: 'in_progress', output: [] }) }));
    return out.map(formatSseEvent).join('');
  }

  /** An event with the next sequence number: call in the order the events go out. */
  private event(type: string, data: Record<string, unknown>): SseEvent {
    return { event: type, data: JSON.stringify({ type, sequence_number: this.seq++, ...data }) };
  }

  private start(out: SseEvent[]): void {
    if (this.started) return;
    this.started = true;
    const snapshot = responseObject(this.req, this.ctx, { status: 'in_progress', output: [] });
    out.push(this.event('response.created', { response: snapshot }), this.event('response.in_progress', { response: snapshot }));
  }

  private reasoning(out: SseEvent[], text: string): void {
    let open = this.open;
    if (open?.kind !== 'reasoning') {
      this.close(out);
      const index = this.output.length;
      open = this.open = { kind: 'reasoning', index, id: itemId('rs', this.ctx, index), text: '' };
      out.push(this.event('response.output_item.added', { output_index: index, item: { type: 'reasoning', id: open.id, summary: [] } }));
      out.push(
        this.event('response.reasoning_summary_part.added', {
          item_id: open.id,
          output_index: index,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        }),
      );
    }
    open.text += text;
    out.push(this.event('response.reasoning_summary_text.delta', { item_id: open.id, output_index: open.index, summary_index: 0, delta: text }));
  }

  private text(out: SseEvent[], text: string): void {
    let open = this.open;
    if (open?.kind !== 'message') {
      this.close(out);
      const index = this.output.length;
      open = this.open = { kind: 'message', index, id: itemId('msg', this.ctx, index), text: '' };
      out.push(this.event('response.output_item.added', { output_index: index, item: messageItem(open.id, '', 'in_progress') }));
      out.push(
        this.event('response.content_part.added', {
          item_id: open.id,
          output_index: index,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
      );
    }
    open.text += text;
    out.push(this.event('response.output_text.delta', { item_id: open.id, output_index: open.index, content_index: 0, delta: text, logprobs: [] }));
  }

  private toolStart(out: SseEvent[], e: { index: number; id: string; name: string }): void {
    this.close(out);
    const index = this.output.length;
    const target = this.targets[e.name];
    const open: Open = {
      kind: 'tool',
      index,
      id: itemId('fc', this.ctx, index),
      upstreamIndex: e.index,
      call: { id: e.id, name: e.name, arguments: '' },
      target,
    };
    this.open = open;
    if (streamsArguments(target)) {
      out.push(this.event('response.output_item.added', { output_index: index, item: { ...callItem(open.id, open.call, target), status: 'in_progress' } }));
    }
  }

  private toolArgs(out: SseEvent[], e: { index: number; text: string }): void {
    const open = this.open;
    if (open?.kind !== 'tool' || open.upstreamIndex !== e.index) return;
    open.call.arguments += e.text;
    if (streamsArguments(open.target)) {
      out.push(this.event('response.function_call_arguments.delta', { item_id: open.id, output_index: open.index, delta: e.text }));
    }
  }

  /** Closes the open item: its closing events, then `output_item.done`, and it joins the output. */
  private close(out: SseEvent[]): void {
    const o = this.open;
    if (!o) return;
    this.open = null;
    if (o.kind === 'reasoning') {
      const part = { type: 'summary_text', text: o.text };
      out.push(this.event('response.reasoning_summary_text.done', { item_id: o.id, output_index: o.index, summary_index: 0, text: o.text }));
      out.push(this.event('response.reasoning_summary_part.done', { item_id: o.id, output_index: o.index, summary_index: 0, part }));
      this.done(out, o.index, { type: 'reasoning', id: o.id, summary: [part], encrypted_content: encodeReasoning(o.text) });
    } else if (o.kind === 'message') {
      const part = { type: 'output_text', text: o.text, annotations: [] };
      out.push(this.event('response.output_text.done', { item_id: o.id, output_index: o.index, content_index: 0, text: o.text, logprobs: [] }));
      out.push(this.event('response.content_part.done', { item_id: o.id, output_index: o.index, content_index: 0, part }));
      this.done(out, o.index, messageItem(o.id, o.text));
    } else {
      const item = callItem(o.id, o.call, o.target);
      if (streamsArguments(o.target)) {
        out.push(this.event('response.function_call_arguments.done', { item_id: o.id, output_index: o.index, arguments: o.call.arguments }));
      } else {
        out.push(this.event('response.output_item.added', { output_index: o.index, item: { ...item, status: 'in_progress' } }));
      }
      this.done(out, o.index, item);
    }
  }

  private done(out: SseEvent[], index: number, item: unknown): void {
    this.output.push(item);
    out.push(this.event('response.output_item.done', { output_index: index, item }));
  }
}

/** Function calls stream their argument text; the other tool kinds carry parsed input, sent whole. */
function streamsArguments(target: ToolTarget | undefined): boolean {
  return (target?.kind ?? 'function') === 'function';
}

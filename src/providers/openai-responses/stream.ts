import type { ReplyRequest } from '../../core/chat.js';
import type { SseEvent } from '../../core/sse/parse.js';
import { formatSseEvent } from '../../core/sse/write.js';
import { openaiErrorBody } from '../openai-chat/errors.js';
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
  const targets = (req.codecState as ResponsesCodecState).tools;
  const output: unknown[] = [];
  let seq = 0;
  let started = false;
  let open: Open | null = null;
  let finish: string | null = null;
  const event = (type: string, data: Record<string, unknown>): SseEvent => ({ event: type, data: JSON.stringify({ type, sequence_number: seq++, ...data }) });

  const start = (out: SseEvent[]) => {
    if (started) return;
    started = true;
    const snapshot = responseObject(req, ctx, { status: 'in_progress', output: [] });
    out.push(event('response.created', { response: snapshot }), event('response.in_progress', { response: snapshot }));
  };

  const close = (out: SseEvent[]) => {
    const o = open;
    if (!o) return;
    open = null;
    if (o.kind === 'reasoning') {
      const part = { type: 'summary_text', text: o.text };
      out.push(event('response.reasoning_summary_text.done', { item_id: o.id, output_index: o.index, summary_index: 0, text: o.text }));
      out.push(event('response.reasoning_summary_part.done', { item_id: o.id, output_index: o.index, summary_index: 0, part }));
      const item = { type: 'reasoning', id: o.id, summary: [part], encrypted_content: encodeReasoning(o.text) };
      output.push(item);
      out.push(event('response.output_item.done', { output_index: o.index, item }));
    } else if (o.kind === 'message') {
      const part = { type: 'output_text', text: o.text, annotations: [] };
      out.push(event('response.output_text.done', { item_id: o.id, output_index: o.index, content_index: 0, text: o.text, logprobs: [] }));
      out.push(event('response.content_part.done', { item_id: o.id, output_index: o.index, content_index: 0, part }));
      const item = messageItem(o.id, o.text);
      output.push(item);
      out.push(event('response.output_item.done', { output_index: o.index, item }));
    } else {
      const item = callItem(o.id, o.call, o.target);
      if (streamsArguments(o.target)) {
        out.push(event('response.function_call_arguments.done', { item_id: o.id, output_index: o.index, arguments: o.call.arguments }));
      } else {
        out.push(event('response.output_item.added', { output_index: o.index, item: { ...item, status: 'in_progress' } }));
      }
      output.push(item);
      out.push(event('response.output_item.done', { output_index: o.index, item }));
    }
  };

  return {
    push({ events }) {
      const out: SseEvent[] = [];
      start(out);
      for (const e of events) {
        if (e.kind === 'reasoning') {
          if (open?.kind !== 'reasoning') {
            close(out);
            const index = output.length;
            open = { kind: 'reasoning', index, id: itemId('rs', ctx, index), text: '' };
            out.push(event('response.output_item.added', { output_index: index, item: { type: 'reasoning', id: open.id, summary: [] } }));
            out.push(
              event('response.reasoning_summary_part.added', {
                item_id: open.id,
                output_index: index,
                summary_index: 0,
                part: { type: 'summary_text', text: '' },
              }),
            );
          }
          open.text += e.text;
          out.push(event('response.reasoning_summary_text.delta', { item_id: open.id, output_index: open.index, summary_index: 0, delta: e.text }));
        } else if (e.kind === 'text') {
          if (open?.kind !== 'message') {
            close(out);
            const index = output.length;
            open = { kind: 'message', index, id: itemId('msg', ctx, index), text: '' };
            out.push(event('response.output_item.added', { output_index: index, item: messageItem(open.id, '', 'in_progress') }));
            out.push(
              event('response.content_part.added', {
                item_id: open.id,
                output_index: index,
                content_index: 0,
                part: { type: 'output_text', text: '', annotations: [] },
              }),
            );
          }
          open.text += e.text;
          out.push(event('response.output_text.delta', { item_id: open.id, output_index: open.index, content_index: 0, delta: e.text, logprobs: [] }));
        } else if (e.kind === 'tool-start') {
          close(out);
          const index = output.length;
          const target = targets[e.name];
          open = { kind: 'tool', index, id: itemId('fc', ctx, index), upstreamIndex: e.index, call: { id: e.id, name: e.name, arguments: '' }, target };
          if (streamsArguments(target)) {
            out.push(event('response.output_item.added', { output_index: index, item: { ...callItem(open.id, open.call, target), status: 'in_progress' } }));
          }
        } else if (e.kind === 'tool-args') {
          if (open?.kind === 'tool' && open.upstreamIndex === e.index) {
            open.call.arguments += e.text;
            if (streamsArguments(open.target)) {
              out.push(event('response.function_call_arguments.delta', { item_id: open.id, output_index: open.index, delta: e.text }));
            }
          }
        } else {
          finish = e.reason;
        }
      }
      return out;
    },
    end({ promptTokens, completionTokens }) {
      const out: SseEvent[] = [];
      start(out);
      close(out);
      const status = finish === 'length' ? 'incomplete' : 'completed';
      const response = responseObject(req, ctx, { status, output, usage: usageObject(promptTokens, completionTokens) });
      out.push(event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }));
      return out;
    },
    error(err) {
      const out: SseEvent[] = [];
      start(out);
      const { code, message } = openaiErrorBody(err).error;
      out.push(event('response.failed', { response: responseObject(req, ctx, { status: 'failed', output, error: { code, message } }) }));
      return out.map(formatSseEvent).join('');
    },
    keepAlive() {
      const out: SseEvent[] = [];
      if (!started) start(out);
      else out.push(event('response.in_progress', { response: responseObject(req, ctx, { status: 'in_progress', output: [] }) }));
      return out.map(formatSseEvent).join('');
    },
  };
}

/** Function calls stream their argument text; the other tool kinds carry parsed input, sent whole. */
function streamsArguments(target: ToolTarget | undefined): boolean {
  return (target?.kind ?? 'function') === 'function';
}

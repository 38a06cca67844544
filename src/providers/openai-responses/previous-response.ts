import { isRecord } from '../../core/chat.js';
import { SseParser } from '../../core/sse/parse.js';
import type { RecordedExchange } from '../types.js';
import type { ResponsesItem } from './types.js';

/**
 * The conversation up to and including a recorded response: its own previous_response_id chain,
 * its input, and the output items the caller received. Null when any link is unknown.
 */
export function previousItems(responseId: string, lookup: (id: string) => RecordedExchange | undefined, depth = 0): ResponsesItem[] | null {
  if (depth > 1000) return null;
  const exchange = lookup(responseId);
  if (!exchange || !isRecord(exchange.request)) return null;
  const request = exchange.request;
  const output = outputItems(exchange);
  if (!output) return null;
  let earlier: ResponsesItem[] = [];
  if (typeof request.previous_response_id === 'string' && request.previous_response_id) {
    const chain = previousItems(request.previous_response_id, lookup, depth + 1);
    if (!chain) return null;
    earlier = chain;
  }
  const input: ResponsesItem[] =
    typeof request.input === 'string'
      ? [{ type: 'message', role: 'user', content: request.input }]
      : Array.isArray(request.input)
        ? (request.input as ResponsesItem[])
        : [];
  return [...earlier, ...input, ...output];
}

/** The `output` of a recorded reply: the JSON response, or the stream's `response.completed` event. */
function outputItems(exchange: RecordedExchange): ResponsesItem[] | null {
  let response: unknown;
  if (exchange.streamed) {
    const events = new SseParser().push(exchange.reply);
    const done = events.find((e) => e.event === 'response.completed' || e.event === 'response.incomplete');
    if (!done) return null;
    response = (JSON.parse(done.data) as { response?: unknown }).response;
  } else {
    response = JSON.parse(exchange.reply);
  }
  return isRecord(response) && Array.isArray(response.output) ? (response.output as ResponsesItem[]) : null;
}

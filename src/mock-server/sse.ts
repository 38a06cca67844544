import type { ServerResponse } from 'node:http';

export type FaultMode = 'http-500' | 'http-400-context' | 'bad-json' | 'stall' | 'drop' | 'error-event';

/** One streamed reply: what each of the mock's endpoints sends, in the order it sends it. */
export interface SseReply {
  /** Sent as soon as the stream opens (after `latencyMs`), before any fault strikes. */
  head: unknown[];
  /** The reply proper, `chunkDelayMs` apart; `drop` cuts the connection after three of them. */
  body: unknown[];
  /** Sent after the body (usage), then `data: [DONE]`. */
  tail: unknown[];
  /** What the server sends when generation fails mid-stream (`error-event`). */
  errorEvent: unknown;
  /** The start of a chunk that never ends (`bad-json`). */
  brokenData: string;
}

export interface SseTiming {
  latencyMs?: number;
  chunkDelayMs?: number;
  /** Awaited before body chunk `index` is sent (the mock's `holdAt` gate). */
  beforeChunk?: (index: number) => Promise<void> | void;
}

/**
 * Writes a Server-Sent Events reply, misbehaving as `fault` says: `stall` sends the head and then
 * nothing, `error-event` an error event after the head, `bad-json` a chunk cut off mid-JSON, `drop`
 * closes the socket after three body chunks.
 */
export async function writeSse(res: ServerResponse, reply: SseReply, fault: FaultMode | undefined, timing: SseTiming): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.flushHeaders();
  if (timing.latencyMs) await sleep(timing.latencyMs);
  const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
  for (const event of reply.head) send(event);
  if (fault === 'stall') return;
  if (fault === 'error-event') {
    send(reply.errorEvent);
    res.end('data: [DONE]\n\n');
    return;
  }
  if (fault === 'bad-json') {
    res.end(`data: ${reply.brokenData}\n\n`);
    return;
  }
  let sent = 0;
  for (const event of reply.body) {
    if (fault === 'drop' && sent >= 3) {
      // After the chunks written so far have left: a response corks its socket until the next
      // tick, and a socket destroyed before that sends none of them.
      await new Promise((r) => setImmediate(r));
      res.socket?.destroy();
      return;
    }
    if (timing.chunkDelayMs) await sleep(timing.chunkDelayMs);
    await timing.beforeChunk?.(sent);
    if (res.destroyed) return;
    send(event);
    sent++;
  }
  for (const event of reply.tail) send(event);
  res.end('data: [DONE]\n\n');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

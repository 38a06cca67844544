import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CanonicalRequest, ChatUsage, ReplyRequest } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import { formatSseEvent } from '../core/sse/write.js';
import { normalizeRequest } from '../providers/normalize.js';
import { replyView } from '../providers/reply-view.js';
import { StreamEventReader } from '../providers/stream-events.js';
import type { DecodeContext, EncodeContext, ProviderCodec, StreamTranslator } from '../providers/types.js';
import { applySamplingPolicy, PASS_THROUGH, type SamplingPolicy, type SamplingRecord, samplingRecord } from '../upstream/sampling-policy.js';
import type { CallOutcome, Upstream, UpstreamChunk, UpstreamRequest } from '../upstream/types.js';
import { parseJsonBody, readBodyBytes } from '../core/http/body.js';
import type { CallRecord } from './call-record.js';
import { assistantMessageOf } from './assistant-message.js';
import { KeepAlive } from './keepalive.js';
import { renderError, sendError } from './render-error.js';
import { sendJsonText } from '../core/http/send.js';
import { toPolarError } from './reply.js';
import { SseWriter } from './sse-writer.js';
import { StreamCollector } from './stream-collector.js';
import { parseAsBytes, prepareFromBytes, realize, requestFacts, type RequestFacts } from './wire-body.js';

export const UPSTREAM_SESSION_HEADER = 'x-polar-session';

/** A streaming call writes what it has received so far at most this often (see RequestsTable.checkpoint). */
const CHECKPOINT_EVERY_MS = 1000;

export interface ModelCallContext {
  upstream: Upstream;
  codec: ProviderCodec;
  /** Replaces the model the harness asked for; null passes the requested name through. */
  servedModel: string | null;
  /** The served model's context length, for clamping `max_tokens`; null when unknown. */
  contextWindow: number | null;
  /** A cap on every call's output tokens (polar gym-agent: the row's max_output_tokens). */
  maxTokens?: number | null;
  maxBodyBytes: number;
  keepAliveMs: number;
  /** The provider path (without a session prefix). */
  apiPath: string;
  /** A Responses reply recorded in `sessionId` (a previous_response_id resolves only within its own session). */
  lookupResponse?: (responseId: string, sessionId: string) => ReturnType<NonNullable<DecodeContext['lookupResponse']>>;
  /** Who chooses the sampling (sampling-policy.ts); left out: pass-through, as plain capture. */
  sampling?: SamplingPolicy;
}

/**
 * One model call: read and decode the body, forward it, relay the reply, and record everything.
 * Every path ends with the call's row completed: `ok`, `error` (with the error the harness got in
 * its own provider's shape) or `aborted` (the harness left; what had arrived is kept).
 */
export async function handleModelCall(req: IncomingMessage, res: ServerResponse, call: CallRecord, ctx: ModelCallContext, preRead?: Buffer): Promise<void> {
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort();
  };
  res.on('close', onClose);
  let bytes: Buffer | null = preRead ?? null;
  let prepared = false;
  let outcome: CallOutcome | null = null;
  try {
    const { upstreamReq, stream, request } = prepareCall((bytes ??= await readBodyBytes(req, ctx.maxBodyBytes)), call, ctx);
    // From here the record holds the body until it is written (beginSoon), and then nothing does:
    // an in-flight call keeps only what it still needs while the server generates.
    bytes = null;
    prepared = true;
    const plan: CallPlan = { res, call, ctx, request, upstreamReq, signal: abort.signal };
    outcome = stream ? await streamCall(plan) : await completeCall(plan);
  } catch (err) {
    failBeforeHeaders(res, call, ctx.codec, toPolarError(err, abort.signal), bytes);
  } finally {
    res.off('close', onClose);
    // Upstreams that continue calls learn which replies reached the harness whole.
    if (prepared) ctx.upstream.settle?.(call.context, outcome);
  }
}

/**
 * The upstream request for a body, and the call's row scheduled. Parsed once, one byte per character
 * (wire-body.ts): the upstream body is built from that reading where it is exact, and what the record
 * and the reply's encoder read of the request is realized from it; elsewhere the reading is realized
 * whole, and the body is decoded as text only where it cannot be read that way.
 */
function prepareCall(body: Buffer, call: CallRecord, ctx: ModelCallContext): { upstreamReq: UpstreamRequest; stream: boolean; request: () => ReplyRequest } {
  const asBytes = parseAsBytes(body);
  const fast =
    asBytes === undefined
      ? null
      : prepareFromBytes(asBytes, ctx.codec, ctx.upstream, {
          path: ctx.apiPath,
          contextWindow: ctx.contextWindow,
          maxTokens: ctx.maxTokens ?? null,
          servedModel: ctx.servedModel,
          call: { ...call.context, contextWindow: ctx.contextWindow },
          bytes: body,
          sampling: ctx.sampling ?? PASS_THROUGH,
        });
  let upstreamReq: UpstreamRequest;
  let stream: boolean;
  let facts: () => RequestFacts;
  let sampling: SamplingRecord;
  if (fast) {
    ({ upstreamReq, stream, sampling } = fast);
    facts = once(fast.facts);
  } else {
    // The byte reading, realized, where there is one (a token-in upstream, a wide character in
    // the upstream body, …): the same value JSON.parse of the decoded text gives, without parsing
    // the body again (the codecs leave a parsed value as it is: wire-body.test.ts).
    const u = understandRequest(asBytes === undefined ? parseJsonBody(body.toString('utf8')) : realize(asBytes), ctx, call.context.sessionId);
    const policy = ctx.sampling ?? PASS_THROUGH;
    const pinned = applySamplingPolicy(u.canonical, policy, ctx.upstream.kind);
    upstreamReq = ctx.upstream.prepare(pinned.req, u.model, { ...call.context, contextWindow: ctx.contextWindow });
    sampling = samplingRecord(policy, pinned, upstreamReq.body);
    stream = pinned.req.stream;
    const known = requestFacts(pinned.req, u.model);
    facts = () => known;
  }
  // The session rides along so a server (or a scheduler in front of it) can tell sessions apart;
  // vLLM and SGLang ignore headers they do not know.
  upstreamReq.headers = { ...upstreamReq.headers, [UPSTREAM_SESSION_HEADER]: call.context.sessionId };
  recordSoon(call, body, upstreamReq, facts, sampling);
  return { upstreamReq, stream, request: () => facts().reply };
}

/** The row and bodies, written on the turn after the request went upstream, while the server works. */
function recordSoon(call: CallRecord, body: Buffer, upstreamReq: UpstreamRequest, facts: () => RequestFacts, sampling: SamplingRecord): void {
  call.beginSoon(() => {
    const { reply, model, stream, toolCount } = facts();
    return {
      originalRequest: body,
      upstreamRequest: upstreamReq.bytes ?? upstreamReq.text,
      requestedModel: reply.requestedModel || null,
      servedModel: model,
      streamed: stream,
      render: upstreamReq.render ?? null,
      toolCount,
      sampling,
    };
  });
}

/** `make()`, made on the first call and kept; `make` itself is let go then (it may hold a parsed body). */
function once<T>(make: () => T): () => T {
  let pending: (() => T) | null = make;
  let value: T;
  return () => {
    if (pending) {
      value = pending();
      pending = null;
    }
    return value;
  };
}

/** The request as text: decoded, normalized, and the model it goes to. */
function understandRequest(json: unknown, ctx: ModelCallContext, sessionId: string): { canonical: CanonicalRequest; model: string } {
  const lookup = ctx.lookupResponse;
  const decoded = ctx.codec.decodeRequest(json, { path: ctx.apiPath, ...(lookup ? { lookupResponse: (id: string) => lookup(id, sessionId) } : {}) });
  const canonical = normalizeRequest(decoded, { contextWindow: ctx.contextWindow, maxTokens: ctx.maxTokens ?? null });
  const model = ctx.servedModel ?? canonical.requestedModel;
  if (!model) {
    throw new PolarError('POLAR_BAD_REQUEST', 'request names no model and the proxy has no --model to serve', 400, { param: 'model' });
  }
  return { canonical, model };
}

/** One understood call, ready to go upstream. */
interface CallPlan {
  res: ServerResponse;
  call: CallRecord;
  ctx: ModelCallContext;
  /** What the reply's encoder reads of the request, as text (made while the upstream works). */
  request: () => ReplyRequest;
  upstreamReq: UpstreamRequest;
  signal: AbortSignal;
}

async function completeCall({ res, call, ctx, request, upstreamReq, signal }: CallPlan): Promise<CallOutcome> {
  const { completion, tokens } = await ctx.upstream.complete(upstreamReq, signal);
  const text = JSON.stringify(ctx.codec.encodeResponse(completion, request(), tokens, encodeContext(call)));
  const reply = assistantMessageOf(replyView(completion, tokens, call.id));
  // Committed before the reply is released: a reply the harness saw is always in the database.
  call.end({
    status: 'ok',
    httpStatus: 200,
    reply: text,
    finishReason: completion.choices[0]?.finish_reason ?? null,
    usage: completion.usage ?? null,
    usageCounts: reportedUsage(completion.usage),
    servedModel: typeof completion.model === 'string' ? completion.model : null,
    tokens,
    assistantMessage: reply,
  });
  sendJsonText(res, 200, text);
  return { tokens, reply };
}

/** Resolves with the outcome when the whole reply reached the harness, null when it did not. */
async function streamCall({ res, call, ctx, request, upstreamReq, signal }: CallPlan): Promise<CallOutcome | null> {
  // Failures up to here (refused, 4xx/5xx, headers timeout) still get an ordinary HTTP error.
  const chunks = await ctx.upstream.stream(upstreamReq, signal);
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
  const translator = ctx.codec.createStream(request(), encodeContext(call));
  const keepAlive = new KeepAlive(ctx.keepAliveMs, () => {
    if (!res.writableEnded) res.write(translator.keepAlive());
  });
  keepAlive.start();
  const relay: Relay = {
    call,
    translator,
    // Each chunk is read once, into a step the codec translates and the collector records.
    reader: new StreamEventReader(call.id),
    collected: new StreamCollector(ctx.upstream.capturesTokens),
    out: new SseWriter(res, () => keepAlive.touch()),
  };
  try {
    await relayChunks(chunks, relay);
    relay.out.flush();
    const closing = translator.end(relay.reader.counts()).map(formatSseEvent).join('');
    const outcome = commitStream(relay, closing);
    keepAlive.stop();
    res.end(closing);
    return outcome;
  } catch (err) {
    keepAlive.stop();
    failStream(res, relay, toPolarError(err, signal));
    return null;
  }
}

/** One streamed call's parts: its record, the codec's translator, the reader and collector of its chunks, and its writer. */
interface Relay {
  call: CallRecord;
  translator: StreamTranslator;
  reader: StreamEventReader;
  collected: StreamCollector;
  out: SseWriter;
}

/** Translates and sends each chunk as it comes, writing what arrived so far to the record now and then. */
async function relayChunks(chunks: AsyncIterable<UpstreamChunk>, { call, translator, reader, collected, out }: Relay): Promise<void> {
  let checkpointed = Date.now();
  for await (const { chunk, tokens } of chunks) {
    const step = reader.step(chunk, tokens);
    collected.add(step);
    await out.write(translator.push(step));
    if (Date.now() - checkpointed >= CHECKPOINT_EVERY_MS) {
      checkpointed = Date.now();
      out.flush();
      call.checkpoint(collected.tokensSoFar(), out.bytes());
    }
  }
}

/** Commits the whole reply; the caller releases the closing events (`data: [DONE]`) only after. */
function commitStream({ call, collected, out }: Relay, closing: string): CallOutcome {
  const tokens = collected.tokensSoFar();
  const reply = collected.message();
  call.end({
    status: 'ok',
    httpStatus: 200,
    reply: out.bytes(closing),
    finishReason: collected.finishReason,
    usage: collected.usage,
    usageCounts: reportedUsage(collected.usage),
    servedModel: collected.model,
    tokens,
    assistantMessage: reply,
  });
  return { tokens, reply };
}

/** A stream that failed after its headers: the harness gets an in-stream error (unless it left), the call what arrived. */
function failStream(res: ServerResponse, { call, translator, collected, out }: Relay, error: PolarError): void {
  const aborted = error.code === 'POLAR_CLIENT_ABORTED';
  // What was translated before the failure goes out first, as the record says it was sent.
  if (!res.writableEnded) out.flush();
  let tail = '';
  if (!aborted && !res.writableEnded) {
    tail = translator.error(error);
  }
  recordQuietly(call, {
    status: aborted ? 'aborted' : 'error',
    httpStatus: 200,
    reply: out.bytes(tail),
    error: aborted ? 'harness disconnected mid-stream' : error.message,
    errorCode: error.code,
    finishReason: collected.finishReason,
    usage: collected.usage,
    servedModel: collected.model,
    tokens: collected.tokensSoFar(),
  });
  if (!res.writableEnded) res.end(tail);
}

function encodeContext(call: CallRecord): EncodeContext {
  return { callId: call.id, created: Math.floor(call.startedAt / 1000) };
}

function reportedUsage(usage: ChatUsage | null | undefined): { promptTokens?: number; completionTokens?: number } {
  if (!usage) return {};
  const out: { promptTokens?: number; completionTokens?: number } = {};
  if (typeof usage.prompt_tokens === 'number') out.promptTokens = usage.prompt_tokens;
  if (typeof usage.completion_tokens === 'number') out.completionTokens = usage.completion_tokens;
  return out;
}

/** An error before any reply bytes: the harness gets its provider's error shape and the call a row. */
function failBeforeHeaders(res: ServerResponse, call: CallRecord, codec: ProviderCodec, error: PolarError, body: Buffer | null): void {
  if (res.headersSent) {
    // The stream path records its own failures; this is a store failure after the last event.
    if (!res.writableEnded) res.end();
    return;
  }
  let reply = renderError(codec, error);
  const aborted = error.code === 'POLAR_CLIENT_ABORTED';
  if (!call.isEnded) {
    const errorEnd = (e: PolarError, r: typeof reply) => ({
      status: aborted ? ('aborted' as const) : ('error' as const),
      httpStatus: aborted ? null : r.status,
      reply: aborted ? null : r.text,
      error: e.message,
      errorCode: e.code,
    });
    let refused: PolarError | null = null;
    try {
      // A body read but not yet handed to the record (the request failed before it was prepared).
      call.begin(body ? { originalRequest: body } : {});
      call.end(errorEnd(error, reply));
    } catch (err) {
      refused = toPolarError(err);
    }
    if (refused && !aborted) {
      // The database refused the row (a full disk): the harness gets that, in its own API's shape,
      // rather than an answer polar could not record; the row is written as such once it can be.
      reply = renderError(codec, refused);
      recordQuietly(call, errorEnd(refused, reply));
    }
  }
  if (!aborted) sendError(res, reply);
  else if (!res.writableEnded) res.destroy();
}

function recordQuietly(call: CallRecord, end: Parameters<CallRecord['end']>[0]): void {
  try {
    call.end(end);
  } catch (err) {
    // CallRecord.end keeps the end and writes it once the database takes writes again.
    process.emitWarning(`polar: ${(err as Error).message}`, { code: 'POLAR_STORE_WRITE' });
  }
}

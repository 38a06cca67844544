import type { CanonicalRequest, ChatCompletion, ProviderName, ReplyRequest } from '../core/chat.js';
import type { PolarError } from '../core/errors.js';
import type { SseEvent } from '../core/sse/parse.js';
import type { CapturedTokens } from '../core/tokens.js';
import type { StreamCounts, StreamStep } from './stream-step.js';

/** An HTTP error reply in the caller's own provider shape. */
export interface ErrorReply {
  status: number;
  body: unknown;
}

/** What decoding may look up: earlier replies, for stateless APIs that refer back (Responses). */
export interface DecodeContext {
  /** The provider path, e.g. `/v1beta/models/gemini-2.5-pro:streamGenerateContent` (model names live there). */
  path: string;
  /** A reply this proxy recorded earlier, by the id it gave the caller; undefined when unknown. */
  lookupResponse?: (responseId: string) => RecordedExchange | undefined;
  /**
   * The body was parsed one byte per character (proxy/wire-body.ts): strings hold UTF-8 bytes. A
   * codec then only moves strings, and anything it makes from bytes itself stays in bytes.
   */
  byteStrings?: boolean;
}

export interface RecordedExchange {
  /** The request body the caller sent, parsed. */
  request: unknown;
  /** The reply the caller received: a JSON body, or the SSE text of a stream. */
  reply: string;
  streamed: boolean;
}

/** Stable facts about one call that a reply is built from (ids derive from the call's id). */
export interface EncodeContext {
  callId: string;
  /** Seconds since the epoch. */
  created: number;
}

/**
 * Turns one call's stream steps into the provider's events. State (open blocks, tool-call indexes,
 * sequence numbers) lives in the instance, one per call. `end()` returns the closing events, which
 * the proxy releases only after the call's record is committed.
 */
export interface StreamTranslator {
  push(step: StreamStep): SseEvent[];
  end(counts: StreamCounts): SseEvent[];
  /** The bytes that report a failure after the response headers went out (in-stream error). */
  error(err: PolarError): string;
  /** What keeps this stream alive for the harness's idle watchdog while nothing else flows. */
  keepAlive(): string;
}

/** A provider's token-counting endpoint (Anthropic `count_tokens`, Gemini `countTokens`). */
export interface CountTokensShape {
  /** The request to decode, from the endpoint's body (Gemini may wrap it). */
  request(body: unknown): unknown;
  /** The provider path of the model call the count stands for (model names live in Gemini paths). */
  path(apiPath: string): string;
  reply(count: number): unknown;
}

/** One provider API: pure functions from its wire format to the canonical one and back. */
export interface ProviderCodec {
  readonly name: ProviderName;
  /** Narrows untrusted JSON once; throws PolarError('POLAR_BAD_REQUEST') on anything malformed. */
  decodeRequest(body: unknown, ctx: DecodeContext): CanonicalRequest;
  encodeResponse(done: ChatCompletion, req: ReplyRequest, tokens: CapturedTokens, ctx: EncodeContext): unknown;
  createStream(req: ReplyRequest, ctx: EncodeContext): StreamTranslator;
  renderError(err: PolarError): ErrorReply;
  /** Null for APIs without a token-counting endpoint. */
  readonly countTokens: CountTokensShape | null;
}

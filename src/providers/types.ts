import type { CanonicalRequest, ChatCompletion, ChatCompletionChunk, ProviderName } from '../core/chat.js';
import type { PolarError } from '../core/errors.js';
import type { SseEvent } from '../core/sse/parse.js';
import type { CapturedTokens } from '../core/tokens.js';
import type { TokenDelta } from '../upstream/types.js';

/** An HTTP error reply in the caller's own provider shape. */
export interface ErrorReply {
  status: number;
  body: unknown;
}

/**
 * Turns one call's canonical chunks into the provider's events. State (open blocks, tool-call
 * indexes) lives in the instance, one per call. `end()` returns the closing events, which the
 * proxy releases only after the call's record is committed.
 */
export interface StreamTranslator {
  push(chunk: ChatCompletionChunk, tokens: TokenDelta | null): SseEvent[];
  end(): SseEvent[];
  /** In-stream error events, for failures after the response headers went out. */
  error(err: PolarError): SseEvent[];
}

/** One provider API: pure functions from its wire format to the canonical one and back. */
export interface ProviderCodec {
  readonly name: ProviderName;
  /** Narrows untrusted JSON once; throws PolarError('POLAR_BAD_REQUEST') on anything malformed. */
  decodeRequest(body: unknown): CanonicalRequest;
  encodeResponse(done: ChatCompletion, req: CanonicalRequest, tokens: CapturedTokens): unknown;
  createStream(req: CanonicalRequest): StreamTranslator;
  /** Bytes that keep a quiet stream alive for this provider's clients. */
  keepAlive(): string;
  renderError(err: PolarError): ErrorReply;
}

import type { CanonicalRequest, ChatCompletion, ChatCompletionChunk } from '../core/chat.js';
import type { CapturedTokens } from '../core/tokens.js';

export type UpstreamKind = 'vllm' | 'openai';

export const UPSTREAM_KINDS: readonly UpstreamKind[] = ['vllm', 'openai'];

/** What goes over the wire to the inference server; `body` is stored as the upstream request. */
export interface UpstreamRequest {
  path: string;
  stream: boolean;
  body: Record<string, unknown>;
  /** `body` serialised once: sent upstream and stored as is. */
  text: string;
}

export interface ServedModel {
  id: string;
  /** vLLM's `max_model_len`. */
  maxModelLen?: number;
}

/** A finished non-streaming call: the canonical reply (server-only fields removed) and its tokens. */
export interface UpstreamCompletion {
  completion: ChatCompletion;
  tokens: CapturedTokens;
}

/** Token data carried by one streamed chunk. */
export interface TokenDelta {
  promptIds?: number[];
  sampledIds?: number[];
  logprobs?: number[];
}

export interface UpstreamChunk {
  chunk: ChatCompletionChunk;
  tokens: TokenDelta | null;
}

/**
 * One inference server family. The proxy knows only this interface, so an adapter for another
 * server (SGLang, llama.cpp, a token-in/token-out renderer) plugs in without touching it.
 */
export interface Upstream {
  readonly kind: UpstreamKind;
  readonly baseUrl: string;
  /** Whether this adapter returns the server's token ids (`token_source = upstream`). */
  readonly capturesTokens: boolean;
  prepare(req: CanonicalRequest, model: string): UpstreamRequest;
  complete(req: UpstreamRequest, signal: AbortSignal): Promise<UpstreamCompletion>;
  /** Resolves once the server accepted the stream; rejects (before any chunk) when it did not. */
  stream(req: UpstreamRequest, signal: AbortSignal): Promise<AsyncIterable<UpstreamChunk>>;
  /** The models the server serves, with their context length when it says. */
  models(signal?: AbortSignal): Promise<ServedModel[]>;
  /** Prompt tokens for a request, from the server's tokenizer; null when it has no such endpoint. */
  countTokens(req: CanonicalRequest, model: string, signal?: AbortSignal): Promise<number | null>;
  close(): Promise<void>;
}

import type { CanonicalRequest, ChatCompletion, ChatCompletionChunk, ChatMessage } from '../core/chat.js';
import type { ThinkingSetting } from './thinking.js';
import type { CapturedTokens, TokenDelta } from '../core/tokens.js';

export type UpstreamKind = 'vllm' | 'openai' | 'vllm-tito' | 'sglang-tito' | 'nemo-rl';

export const UPSTREAM_KINDS: readonly UpstreamKind[] = ['vllm', 'openai', 'vllm-tito', 'sglang-tito', 'nemo-rl'];

/** The call a request belongs to, for upstreams that continue earlier calls (bridging). */
export interface CallContext {
  id: string;
  sessionId: string;
  agentId: string;
  /** The served model's context length, when known: token-in upstreams size max_tokens with it. */
  contextWindow?: number | null;
}

/**
 * How a call's prompt was built. `bridged`: the parent call's prompt and sampled ids, byte for
 * byte, then only the new messages rendered (or, for `nemo-rl`, the parent's ids handed to the
 * server to splice). `full`: the whole conversation rendered, for `reason`.
 */
export interface PromptRender {
  mode: 'bridged' | 'full';
  parentCallId: string | null;
  reason: string | null;
  /** Tokens polar rendered and tokenized for this call (the new messages, or everything). */
  renderedTokens: number | null;
}

/** What a finished call leaves for the calls that continue it. */
export interface CallOutcome {
  tokens: CapturedTokens;
  /** The reply the harness received, as a canonical assistant message. */
  reply: ChatMessage;
}

/** What goes over the wire to the inference server; `body` is stored as the upstream request. */
export interface UpstreamRequest {
  path: string;
  stream: boolean;
  body: Record<string, unknown>;
  /** `body` serialised once: sent upstream and stored as is. */
  text: string;
  /**
   * The bytes to send, when made straight from the request's bytes (proxy/wire-body.ts): then they
   * are the request, sent and stored as they are, and `body` and `text` are left empty (only
   * upstreams with `prepareBody` get such requests, and they send `bytes ?? text`).
   */
  bytes?: Buffer;
  /** Set by upstreams that build prompts themselves or pin them (token-in/token-out, nemo-rl). */
  render?: PromptRender;
  /** The call it was prepared for, when the adapter keeps per-call state. */
  callId?: string;
  /** Extra request headers: the proxy names the call's session (`x-polar-session`; servers ignore it). */
  headers?: Record<string, string>;
}

/** An upstream request before its body is serialised. */
export type PreparedBody = Omit<UpstreamRequest, 'text' | 'bytes'>;

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
  /**
   * The tokenizer a token-in upstream renders with (`--tokenizer`: a path, or bundled:qwen3). Recorded
   * on its sessions, so `verify-faithfulness` can decode them without being told.
   */
  readonly tokenizer?: string;
  /**
   * The sampling pair the adapter sets on every request itself, whatever the proxy was told
   * (`nemo-rl`: NeMo-RL asserts its training pair): its calls are always recorded as trainer-pinned.
   */
  readonly pinnedSampling?: { temperature: number; topP: number; thinking: ThinkingSetting };
  prepare(req: CanonicalRequest, model: string, call: CallContext): UpstreamRequest;
  /**
   * `prepare` without serialising the body, offered only by upstreams that move the request's
   * strings into their body without reading, measuring, cutting or rendering them (token-in
   * upstreams render text: never). The proxy then builds the body from the request's bytes without
   * decoding them, copying what it shares with the request (proxy/wire-body.ts, body-splice.ts).
   */
  prepareBody?(req: CanonicalRequest, model: string, call: CallContext): PreparedBody;
  /**
   * Called once per prepared call when it is over: with its outcome when the reply reached the
   * harness whole, with null otherwise. Upstreams that bridge remember the call here.
   */
  settle?(call: CallContext, outcome: CallOutcome | null): void;
  complete(req: UpstreamRequest, signal: AbortSignal): Promise<UpstreamCompletion>;
  /** Resolves once the server accepted the stream; rejects (before any chunk) when it did not. */
  stream(req: UpstreamRequest, signal: AbortSignal): Promise<AsyncIterable<UpstreamChunk>>;
  /** The models the server serves, with their context length when it says. */
  models(signal?: AbortSignal): Promise<ServedModel[]>;
  /** Prompt tokens for a request, from the server's tokenizer; null when it has no such endpoint. */
  countTokens(req: CanonicalRequest, model: string, signal?: AbortSignal): Promise<number | null>;
  close(): Promise<void>;
}

/**
 * The canonical shapes: OpenAI Chat Completions. Every provider codec decodes its request into a
 * `CanonicalRequest` and encodes replies from `ChatCompletion` / `ChatCompletionChunk`; every
 * upstream adapter takes and returns these. Only the fields polar reads or writes are typed; the
 * rest pass through untouched.
 */

export type ProviderName = 'openai-chat' | 'anthropic-messages' | 'openai-responses' | 'google-generate-content';

export interface ChatToolCall {
  id?: string;
  type?: 'function';
  function: { name: string; arguments: string };
  [extra: string]: unknown;
}

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  reasoning_content?: string;
  [extra: string]: unknown;
}

/** The request body sent upstream, less `model` and `stream`/`stream_options` (the adapter sets those). */
export interface ChatRequestBody {
  messages: ChatMessage[];
  tools?: unknown[];
  tool_choice?: unknown;
  [extra: string]: unknown;
}

export interface CanonicalRequest {
  /** The model name the harness asked for; kept in the record and echoed back. */
  requestedModel: string;
  stream: boolean;
  body: ChatRequestBody;
  /** What the caller asked for itself, so its reply carries exactly that and nothing polar added. */
  client: {
    logprobs: boolean;
    tokenIds: boolean;
    includeUsage: boolean;
  };
  /** The caller's thinking switch (Anthropic `thinking`, Responses `reasoning.effort`, Gemini
   *  `thinkingConfig`), for the upstream adapter to apply; undefined leaves the template default. */
  thinking?: boolean;
  /** What the codec needs to encode the reply in its own terms (tool kinds, stop sequences). */
  codecState?: unknown;
  /**
   * Fields normalization took out or replaced because no server could take them as sent
   * (providers/normalize.ts: a `max_tokens` over the context window itself, or, under a cap, not a
   * positive whole number); the trainer's record lists them among the dropped (sampling-policy.ts).
   */
  outOfRange?: string[];
}

/**
 * What a reply is built from: the parts of the request that the codecs' encoders read. Kept this
 * narrow so the proxy can make it from the byte reading (proxy/wire-body.ts) without decoding the
 * request a second time.
 */
export type ReplyRequest = Pick<CanonicalRequest, 'requestedModel' | 'client' | 'codecState'>;

export interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  [extra: string]: unknown;
}

export interface ChatLogprobs {
  content?: { token?: string; logprob: number; [extra: string]: unknown }[] | null;
  [extra: string]: unknown;
}

export interface ChatChoice {
  index: number;
  message: ChatMessage;
  finish_reason: string | null;
  logprobs?: ChatLogprobs | null;
  [extra: string]: unknown;
}

export interface ChatCompletion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: ChatChoice[];
  usage?: ChatUsage | null;
  [extra: string]: unknown;
}

export interface ChatDeltaToolCall {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
  [extra: string]: unknown;
}

export interface ChatDelta {
  role?: string;
  content?: string | null;
  reasoning_content?: string | null;
  tool_calls?: ChatDeltaToolCall[];
  [extra: string]: unknown;
}

export interface ChatChunkChoice {
  index: number;
  delta: ChatDelta;
  finish_reason: string | null;
  logprobs?: ChatLogprobs | null;
  [extra: string]: unknown;
}

export interface ChatCompletionChunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: ChatUsage | null;
  [extra: string]: unknown;
}

/** An output budget a server can keep: a whole number of tokens, at least one (vLLM's SamplingParams refuses less). */
export function isTokenBudget(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A message's content as text: a string as is, or the text of its parts joined by `separator`. */
export function contentText(content: unknown, separator: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join(separator);
}

import type { CanonicalRequest, ChatCompletion, ChatMessage } from '../../core/chat.js';
import { isRecord } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import { expectCompletionShape } from '../chat-shape.js';
import type { UpstreamHttpOptions } from '../http.js';
import { ChatCompletionsUpstream, type ChatDialect } from '../openai-compatible.js';
import { idArray, logprobValue, promptIdArray } from '../token-fields.js';
import { ChainMemory, templateKwargs, type ChainMark } from '../tito/chain-memory.js';
import type { CallContext, CallOutcome, ServedModel, Upstream, UpstreamChunk, UpstreamCompletion, UpstreamRequest } from '../types.js';
import { applySamplingPolicy, samplingPolicy, type ThinkingSetting } from '../sampling-policy.js';
import { applyChatConventions, vllmTokenizeBody } from '../vllm/flags.js';
import { completionChunks } from './chunks.js';

/**
 * NeMo-RL's vLLM HTTP server during GRPO (`expose_http_server: true`): `/v1/chat/completions`
 * only, which splices token ids itself. With `logprobs: true, top_logprobs: 0` each reply's message
 * carries `prompt_token_ids`, `generation_token_ids` and `generation_log_probs`; a request whose
 * assistant message carries the first two gets them as a required prefix (NeMo-RL
 * `_replace_prefix_tokens`). So polar bridges without rendering anything: it finds the call a request
 * continues (the same matching as token-in/token-out mode) and puts that call's ids back on the
 * assistant message the harness returned. NeMo-RL asserts its training sampling settings, so
 * `temperature` and `top_p` are set to the configured pair (default 1.0, NeMo-RL's default) on
 * every request, and only the fields on sampling-policy.ts's allow-list pass. The token fields come only on unstreamed replies, so polar
 * always asks for one; a streaming harness gets the finished reply as a stream (opened, with
 * keep-alives, if the generation takes longer than a few seconds).
 */
export interface NemoRlOptions extends UpstreamHttpOptions {
  temperature?: number;
  topP?: number;
  /** The thinking switch every call renders with (sampling-policy.ts TRAINER_THINKING when absent). */
  thinking?: ThinkingSetting;
  /**
   * A streaming harness's reply waits for the whole generation. Up to this long, polar waits before
   * answering at all (so a refusal is still an HTTP error the harness understands); after it, the
   * stream opens and keep-alives flow while the server generates, so no idle timeout fires.
   */
  streamOpenAfterMs?: number;
}

const TOKEN_FIELDS = ['prompt_token_ids', 'generation_token_ids', 'generation_log_probs'] as const;

/**
 * The policy's message allow-list drops every key a harness may not send, the token fields too
 * (a policy must not choose the tokens NeMo-RL splices in); the ones polar's own chain memory
 * pinned on the reply it continues (`prepare`, below) go back on after it, message for message.
 * NeMo-RL reads them at 7ea279a nemo_rl/models/generation/vllm/vllm_worker_async.py:411-420: the
 * last message holding `prompt_token_ids` gives `required_prefix_token_ids` = its
 * `prompt_token_ids` + `generation_token_ids` (`generation_log_probs` is not read there).
 */
function withPinnedTokens(messages: ChatMessage[], prepared: ChatMessage[]): ChatMessage[] {
  return messages.map((m, i) => {
    const source = prepared[i];
    if (!isRecord(source) || !TOKEN_FIELDS.some((k) => k in source)) return m;
    return { ...m, ...Object.fromEntries(TOKEN_FIELDS.filter((k) => k in source).map((k) => [k, source[k]])) };
  });
}

export function nemoRlDialect(options: NemoRlOptions): ChatDialect {
  const policy = samplingPolicy('trainer', 'nemo-rl', options.temperature, options.topP, options.thinking);
  return {
    kind: 'nemo-rl',
    capturesTokens: true,
    body(req: CanonicalRequest, model: string) {
      // Only the allow-list reaches the server, with the trainer's sampling (sampling-policy.ts):
      // NeMo-RL asserts temperature and top_p (policy.generation's pair), and every other field that
      // would sample from another distribution than the one the trainer computes logprobs under
      // (top_k, penalties, logit_bias, guided decoding, beam search, ignore_eos, chat templates, …)
      // is dropped; a forced tool_choice (guided decoding in vLLM) becomes `auto`. The proxy pins
      // requests the same way before they get here; this keeps the adapter safe on its own.
      const policed = applySamplingPolicy(req, policy, 'nemo-rl').req;
      const pinned = { ...policed, body: { ...policed.body, messages: withPinnedTokens(policed.body.messages, req.body.messages) } };
      const body: Record<string, unknown> = { ...pinned.body, model, stream: false };
      delete body.stream_options;
      applyChatConventions(body, pinned);
      body.logprobs = true;
      body.top_logprobs = 0;
      return body;
    },
    completion: extractNemoRlCompletion,
    chunk() {
      throw new Error('nemo-rl replies are not streamed');
    },
    tokenize: { path: '/tokenize', body: vllmTokenizeBody },
  };
}

export function extractNemoRlCompletion(json: unknown): { completion: ChatCompletion; tokens: CapturedTokens } {
  const obj = expectCompletionShape(json);
  const message = obj.choices[0]?.message as (ChatMessage & Record<string, unknown>) | undefined;
  const promptIds = message ? promptIdArray(message.prompt_token_ids, 'choices[0].message.prompt_token_ids') : null;
  const sampledIds = message ? idArray(message.generation_token_ids, 'choices[0].message.generation_token_ids') : null;
  const lps = message?.generation_log_probs;
  const logprobs = Array.isArray(lps) ? lps.map(logprobValue) : null;
  for (const c of obj.choices) {
    if (!isRecord(c.message)) continue;
    for (const f of TOKEN_FIELDS) delete c.message[f];
    const m = c.message as ChatMessage;
    if (typeof m.reasoning === 'string' && m.reasoning_content == null) m.reasoning_content = m.reasoning;
    delete m.reasoning;
  }
  delete obj.prompt_token_ids;
  if (!promptIds && !sampledIds) return { completion: obj, tokens: { source: 'none', promptIds: null, sampledIds: null, logprobs: null } };
  return { completion: obj, tokens: { source: 'upstream', promptIds, sampledIds, logprobs } };
}

export class NemoRlUpstream implements Upstream {
  readonly kind = 'nemo-rl' as const;
  readonly capturesTokens = true;
  readonly baseUrl: string;
  private readonly chat: ChatCompletionsUpstream;
  private readonly memory = new ChainMemory();
  private readonly pending = new Map<string, ChainMark>();

  private readonly streamOpenAfterMs: number;
  readonly pinnedSampling: { temperature: number; topP: number; thinking: ThinkingSetting };

  constructor(options: NemoRlOptions) {
    this.streamOpenAfterMs = options.streamOpenAfterMs ?? 5_000;
    const pinned = samplingPolicy('trainer', 'nemo-rl', options.temperature, options.topP, options.thinking);
    this.pinnedSampling = { temperature: pinned.temperature, topP: pinned.topP, thinking: pinned.thinking };
    this.chat = new ChatCompletionsUpstream(nemoRlDialect(options), options);
    this.baseUrl = this.chat.baseUrl;
  }

  prepare(req: CanonicalRequest, model: string, call: CallContext): UpstreamRequest {
    const messages = req.body.messages;
    const { search: found, mark } = this.memory.locate(call, messages, req.body.tools, templateKwargs(req));
    let sent = req;
    if (found.parent) {
      const { parent, replyIndex } = found;
      const pinned = messages.map((m, i) =>
        i === replyIndex
          ? {
              ...m,
              prompt_token_ids: [...parent.promptIds],
              generation_token_ids: [...parent.sampledIds],
              generation_log_probs: parent.logprobs ? [...parent.logprobs] : [],
            }
          : m,
      );
      sent = { ...req, body: { ...req.body, messages: pinned } };
    }
    const prepared = this.chat.prepare(sent, model);
    prepared.stream = req.stream;
    prepared.callId = call.id;
    prepared.render = found.parent
      ? { mode: 'bridged', parentCallId: found.parent.callId, reason: null, renderedTokens: null }
      : { mode: 'full', parentCallId: null, reason: found.reason, renderedTokens: null };
    this.pending.set(call.id, mark);
    return prepared;
  }

  settle(call: CallContext, outcome: CallOutcome | null): void {
    const mark = this.pending.get(call.id);
    this.pending.delete(call.id);
    if (mark) this.memory.settle(call, mark, outcome);
  }

  complete(req: UpstreamRequest, signal: AbortSignal): Promise<UpstreamCompletion> {
    return this.chat.complete(req, signal);
  }

  async stream(req: UpstreamRequest, signal: AbortSignal): Promise<AsyncIterable<UpstreamChunk>> {
    const pending = this.chat.complete(req, signal);
    pending.catch(() => {}); // awaited below; this only keeps an early rejection from being unhandled
    let timer: NodeJS.Timeout | undefined;
    const opened = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), this.streamOpenAfterMs);
    });
    const early = await Promise.race([pending, opened]).finally(() => clearTimeout(timer));
    if (early) return completionChunks(early.completion, early.tokens);
    return (async function* () {
      const done = await pending;
      yield* completionChunks(done.completion, done.tokens);
    })();
  }

  models(signal?: AbortSignal): Promise<ServedModel[]> {
    return this.chat.models(signal);
  }

  countTokens(req: CanonicalRequest, model: string, signal?: AbortSignal): Promise<number | null> {
    return this.chat.countTokens(req, model, signal);
  }

  close(): Promise<void> {
    return this.chat.close();
  }
}

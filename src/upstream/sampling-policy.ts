import type { CanonicalRequest, ChatMessage, ChatRequestBody } from '../core/chat.js';
import { isRecord, isTokenBudget } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import type { ThinkingSetting } from './thinking.js';
import type { UpstreamKind } from './types.js';

/**
 * Who chooses how a call is sampled and how its prompt is rendered.
 *
 * `trainer` (rollout, worker, gym-agent, train): polar's configuration. The agent holds its session
 * key, so a tool call can send its own requests; whatever sampling or template field it sends would
 * otherwise reach the server, and the tokens it got back would enter the loss as if the trainer's
 * policy had sampled them. So a request keeps only the fields on the allow-list below (what the
 * harness needs to be answered: its messages, tools, output budget, stop strings), and polar sets
 * the sampling parameters itself, to the trainer's values (`--temperature` / `--top-p`, NeMo-RL's
 * defaults 1.0 / 1.0, `policy.generation` in `train`). Everything else is DROPPED, never refused:
 * a harness that sends `temperature: 0.7` or `top_k` of its own must keep working, and the reply it
 * gets is an honest sample from the trainer's distribution (nothing in it pretends otherwise);
 * the call's record lists what was dropped (`sampling.dropped`). The same holds inside the request:
 * message keys outside their role's schema and an output budget no server can keep are dropped
 * too; only media named by URL is refused (trainerMessages), since the server would fetch it.
 *
 * `pass-through` (`polar run`, `polar proxy`: plain capture): the request goes as the harness sent
 * it, and the record lists the fields that changed sampling or the prompt (`sampling.off_policy`),
 * so exports and verify-faithfulness can keep those calls out of the loss.
 *
 * The `nemo-rl` kind is always `trainer`: NeMo-RL's server exists only during training.
 */
export type SamplingMode = 'trainer' | 'pass-through';

export interface SamplingPolicy {
  mode: SamplingMode;
  temperature: number;
  topP: number;
  /** The chat template's thinking switch polar renders with in trainer mode. */
  thinking: ThinkingSetting;
}

// The switch's values live in thinking.ts, which types.ts's Upstream can import without this file.
export { THINKING_SETTINGS, type ThinkingSetting } from './thinking.js';

/**
 * The trainer's default is `template`, what NeMo-RL's own rollouts render with: its recipes leave
 * `policy.tokenizer.chat_template_kwargs` null (NeMo-RL 7ea279a examples/configs/grpo_math_1B.yaml:129,
 * applied only when set: nemo_rl/algorithms/utils.py:394-403), and its vLLM HTTP server merges
 * `default_chat_template_kwargs` (empty unless the recipe sets it) under the request's own keys
 * (nemo_rl/models/generation/vllm/vllm_worker_async.py:689-716). So sending no `enable_thinking`
 * renders as NeMo-RL does, with or without a recipe default; `on` / `off` would override a recipe
 * that sets one. It is also today's render for every harness that sends no switch.
 */
export const TRAINER_THINKING: ThinkingSetting = 'template';

/** The `enable_thinking` a setting sends; undefined: none (the template's default). */
export function thinkingValue(setting: ThinkingSetting | undefined): boolean | undefined {
  return setting === 'on' ? true : setting === 'off' ? false : undefined;
}

/** NeMo-RL's `policy.generation` defaults (nemo-rl.md §4: temperature 1.0, top_p 1.0, top_k null). */
export const TRAINER_TEMPERATURE = 1.0;
export const TRAINER_TOP_P = 1.0;

/** Plain capture's policy: requests go as sent (the numbers are the reference pass-through calls are judged against). */
export const PASS_THROUGH: SamplingPolicy = Object.freeze({
  mode: 'pass-through',
  temperature: TRAINER_TEMPERATURE,
  topP: TRAINER_TOP_P,
  thinking: TRAINER_THINKING,
});

export function samplingPolicy(mode: SamplingMode, kind: string, temperature?: number, topP?: number, thinking?: ThinkingSetting): SamplingPolicy {
  return {
    mode: kind === 'nemo-rl' ? 'trainer' : mode,
    temperature: temperature ?? TRAINER_TEMPERATURE,
    topP: topP ?? TRAINER_TOP_P,
    thinking: thinking ?? TRAINER_THINKING,
  };
}

/**
 * The policy a proxy applies in front of `upstream`: an adapter that pins sampling itself (nemo-rl)
 * makes it `trainer` with the adapter's pair, so the record says what was really sent.
 */
export function effectivePolicy(
  configured: SamplingPolicy | undefined,
  upstream: { pinnedSampling?: { temperature: number; topP: number; thinking: ThinkingSetting } },
): SamplingPolicy {
  if (upstream.pinnedSampling) return { mode: 'trainer', ...upstream.pinnedSampling };
  return configured ?? PASS_THROUGH;
}

/** One line for a command's start-up output: who chooses the sampling. */
export function describeSampling(policy: SamplingPolicy): string {
  return policy.mode === 'trainer'
    ? `sampling: pinned by polar (temperature ${policy.temperature}, top_p ${policy.topP}) with thinking ${policy.thinking}; sampling and template fields a session sends are dropped`
    : 'sampling: pass-through (each request as the harness sent it; calls that set their own sampling or template are flagged and kept out of exports)';
}

/**
 * What a call was sampled with, as sent upstream, and by whose choice: stored with the call
 * (migration 11) so exports and verify-faithfulness can tell on-policy tokens from the rest.
 */
export interface SamplingRecord {
  policy: SamplingMode;
  temperature: number | null;
  top_p: number | null;
  top_k: number | null;
  max_tokens: number | null;
  seed: number | null;
  /** trainer: the session's fields polar removed (or, for `tool_choice`, replaced by `auto`). */
  dropped: string[];
  /** pass-through: fields sent as they came that change what is sampled or how the prompt renders. */
  off_policy: string[];
  /**
   * The pair the call is judged against (the policy's --temperature / --top-p), so export judges a
   * pass-through call by the numbers its capture did (`polar proxy --temperature 0.6`), not by 1.0.
   * Absent on calls recorded before it was kept.
   */
  reference?: { temperature: number; top_p: number };
  /**
   * The thinking switch the call's prompt was rendered with (`enable_thinking`): it shapes the prompt,
   * recorded exactly, not the distribution. Pass-through: the session's own (Anthropic `thinking`,
   * Responses `reasoning.effort`, Gemini `thinkingConfig`); trainer: polar's `--thinking`, the
   * session's own then listed as `thinking` in `dropped` when it differed. Null: none was sent
   * (the template's default).
   */
  thinking?: boolean | null;
}

/**
 * The request fields a session may set, per kind, by their OpenAI Chat names (the canonical form
 * every codec decodes to). The chat kinds forward the body; the token-in kinds read only messages,
 * tools, the budget and stop strings from it (tito/dialect.ts samplingOf, requestedMaxTokens).
 * `stop` ends a reply early but does not change the distribution of any sampled token; `logprobs` /
 * `top_logprobs` only ask for more of what was sampled; `parallel_tool_calls` is applied by the
 * tool parser after sampling; `tool_choice` is kept only as `auto` / `none` (a forced tool is
 * guided decoding in vLLM).
 */
const CHAT_ALLOWED = [
  'messages',
  'model',
  'stream',
  'stream_options',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_tokens',
  'max_completion_tokens',
  'stop',
  'logprobs',
  'top_logprobs',
] as const;

export const ALLOWED_FIELDS: Readonly<Record<UpstreamKind, readonly string[]>> = {
  vllm: CHAT_ALLOWED,
  'nemo-rl': CHAT_ALLOWED,
  openai: CHAT_ALLOWED,
  'vllm-tito': ['messages', 'model', 'stream', 'stream_options', 'tools', 'tool_choice', 'max_tokens', 'max_completion_tokens', 'stop'],
  'sglang-tito': ['messages', 'model', 'stream', 'stream_options', 'tools', 'tool_choice', 'max_tokens', 'max_completion_tokens', 'stop'],
};

/** ALLOWED_FIELDS as sets, made once: every pinned call looks its keys up. */
const ALLOWED_SETS = Object.fromEntries(Object.entries(ALLOWED_FIELDS).map(([k, v]) => [k, new Set(v)])) as unknown as Record<
  UpstreamKind,
  ReadonlySet<string>
>;

/**
 * What polar sends for the sampling settings vLLM and SGLang would otherwise take from the model's
 * generation_config.json (vLLM's default_sampling_params; Qwen3's sets top_k 20, top_p 0.95): the
 * values that leave the distribution as the trainer computes it. `top_k: -1` is "all tokens" in
 * vLLM and SGLang alike, and what NeMo-RL's server sets itself (NeMo-RL 7ea279a
 * nemo_rl/models/generation/vllm/vllm_worker_async.py:737-740 asserts unset or -1, then sets -1).
 */
const NEUTRAL = { top_k: -1, min_p: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 } as const;

/**
 * Fields that change what is sampled or how the prompt renders, from vLLM's ChatCompletionRequest
 * (vllm/entrypoints/openai/protocol.py: its sampling, structured-output and chat-template
 * parameters) and SGLang's chat request: what pass-through flags when a call carries it. A numeric
 * field at its neutral value (top_k -1 or 0, min_p 0, penalties 0 / 1, n 1) is not flagged.
 */
const OFF_POLICY_FIELDS = [
  'top_k',
  'min_p',
  'min_tokens',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'length_penalty',
  'logit_bias',
  'bad_words',
  'allowed_token_ids',
  'logits_processors',
  'vllm_xargs',
  'ignore_eos',
  'use_beam_search',
  'best_of',
  'n',
  'truncate_prompt_tokens',
  'response_format',
  'structured_outputs',
  'structural_tag',
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'guided_decoding_backend',
  'guided_whitespace_pattern',
  'regex',
  'ebnf',
  'json_schema',
  'chat_template',
  'chat_template_kwargs',
  'continue_final_message',
  'add_generation_prompt',
  'add_special_tokens',
  'echo',
  'documents',
  'reasoning_effort',
  'thinking_token_budget',
  'lora_path',
] as const;

const NEUTRAL_VALUES: Readonly<Record<string, readonly unknown[]>> = {
  top_k: [-1, 0],
  min_p: [0],
  min_tokens: [0],
  presence_penalty: [0],
  frequency_penalty: [0],
  repetition_penalty: [1],
  length_penalty: [1],
  n: [1],
  best_of: [1],
  ignore_eos: [false],
  use_beam_search: [false],
  continue_final_message: [false],
  add_generation_prompt: [true],
  echo: [false],
};

const TITO_KINDS: ReadonlySet<string> = new Set(['vllm-tito', 'sglang-tito']);
const TITO_FORWARDED: ReadonlySet<string> = new Set([
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'chat_template_kwargs',
]);

/**
 * The request as the policy lets it go upstream, and what was dropped (trainer) or sent off-policy
 * (pass-through). A trainer request's body is a new object holding only allowed members, each the
 * same value as in the request (never copied), so the byte path can still copy them from the
 * request's bytes (proxy/body-splice.ts) and the chat template kwargs hold only polar's thinking
 * switch: `req.thinking` becomes the policy's `--thinking` (applied later by the adapters, vllm/flags.ts
 * applyChatConventions and tito/chain-memory.ts templateKwargs), and the session's own, when it
 * differed, is listed as `thinking` among the dropped fields.
 */
export function applySamplingPolicy(
  req: CanonicalRequest,
  policy: SamplingPolicy,
  kind: UpstreamKind,
): { req: CanonicalRequest; dropped: string[]; offPolicy: string[] } {
  const body = req.body as Record<string, unknown>;
  if (policy.mode === 'pass-through') {
    const sent = offPolicyFields(body, policy);
    // The token-in kinds forward only the sampling numbers and the template kwargs (tito/dialect.ts
    // samplingOf, chain-memory.ts templateKwargs): the rest of such a body never reaches the server.
    return { req, dropped: [], offPolicy: TITO_KINDS.has(kind) ? sent.filter((f) => TITO_FORWARDED.has(f)) : sent };
  }
  const allowed = ALLOWED_SETS[kind];
  const kept: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const key of Object.keys(body)) {
    if (allowed.has(key)) kept[key] = body[key];
    // The pinned fields are dropped silently when the session sent the trainer's own value.
    else if (!(key === 'temperature' && body[key] === policy.temperature) && !(key === 'top_p' && body[key] === policy.topP)) dropped.push(key);
  }
  if (kept.tool_choice !== undefined && kept.tool_choice !== 'auto' && kept.tool_choice !== 'none') {
    kept.tool_choice = 'auto';
    dropped.push('tool_choice');
  }
  // An output budget no server can keep (-1, 0, 1.5, a string) is dropped: the server then gives
  // what the context leaves, as for a harness that sent none (normalize.ts). Clamping would guess
  // a budget the harness never asked for; refusing would fail a harness that means "no limit" by
  // -1. One over the context window itself normalization already took out (`outOfRange`).
  for (const key of ['max_tokens', 'max_completion_tokens']) {
    if (kept[key] !== undefined && kept[key] !== null && !isTokenBudget(kept[key])) {
      delete kept[key];
      dropped.push(key);
    }
  }
  for (const key of req.outOfRange ?? []) if (!dropped.includes(key)) dropped.push(key);
  if (Array.isArray(body.messages)) kept.messages = trainerMessages(body.messages, dropped);
  kept.temperature = policy.temperature;
  kept.top_p = policy.topP;
  // The hosted APIs behind `openai` reject vLLM's extras, and nothing there is trainable anyway.
  if (kind !== 'openai') Object.assign(kept, NEUTRAL);
  const thinking = thinkingValue(policy.thinking);
  if (req.thinking !== undefined && req.thinking !== thinking) dropped.push('thinking');
  const out: CanonicalRequest = { ...req, body: kept as ChatRequestBody };
  if (thinking === undefined) delete out.thinking;
  else out.thinking = thinking;
  return { req: out, dropped, offPolicy: [] };
}

/**
 * The message keys each role may carry upstream in trainer mode: what OpenAI Chat's message params
 * define (openai-python types/chat/chat_completion_*_message_param.py) and what the chat templates
 * read (Qwen3's: role, content, reasoning_content, tool_calls). vLLM hands the whole message to the
 * template (vllm/entrypoints/chat_utils.py CustomChatCompletionMessageParam takes `tools` on a
 * developer message and a model-specific `task`), and servers read more of their own: Mistral's
 * and DeepSeek's `prefix: true` on the last assistant message continues it instead of answering,
 * so the policy would choose the start of its own reply. Every other key is dropped, never refused
 * (harness SDKs add their own bookkeeping keys to messages), and named `messages[].<key>` in the
 * record, once a key however many messages had it. `reasoning` is vLLM's current name for earlier
 * reasoning (vllm/flags.ts applyChatConventions sets it from `reasoning_content`). Developer
 * messages are system messages by now (normalize.ts); a role not listed keeps the user keys.
 */
const MESSAGE_KEYS: Readonly<Record<string, ReadonlySet<string>>> = {
  system: new Set(['role', 'content', 'name']),
  user: new Set(['role', 'content', 'name']),
  assistant: new Set(['role', 'content', 'name', 'tool_calls', 'refusal', 'reasoning_content', 'reasoning']),
  tool: new Set(['role', 'content', 'tool_call_id', 'name']),
};

/**
 * Content-part members that name media by URL: vLLM's `image_url` / `audio_url` / `video_url`
 * parts, Responses' `input_image` (whose `image_url` is the string), and vLLM's untyped
 * `{"image_url": "…"}` forms (chat_utils.py _parse_chat_message_content_mm_part). Every codec
 * turns its own media into these (Anthropic `image` sources, Gemini `inlineData` / `fileData`,
 * Responses `input_image`), so one check covers them all.
 */
const MEDIA_URL_KEYS = ['image_url', 'audio_url', 'video_url'] as const;

/**
 * Content-part members that hand the server tensors instead of text or media (vLLM's
 * `image_embeds`, `audio_embeds`, `prompt_embeds`; `image_pil` from Python callers): a prompt no
 * tokenizer reproduces, so no training sample can be built from it.
 */
const EMBED_KEYS = ['image_embeds', 'audio_embeds', 'prompt_embeds', 'image_pil'] as const;

/**
 * The messages as a trainer's call sends them: each message's keys cut to its role's allow-list
 * (the dropped ones named in `dropped`), and each content part checked for media. Media goes
 * upstream only inline, as a `data:` URI: a URL (https://, file://, a bare path SGLang would open)
 * has the inference server fetch it, from inside the training cluster, at a URL the policy chose,
 * which is a request forgery and an exfiltration route (vLLM's MediaConnector fetches http(s), and
 * file: under --allowed-local-media-path; vllm/multimodal/media). That is REFUSED, with a 400 in
 * the harness's own API (the call's record keeps the error and the request as sent): polar will
 * not forward it, and forwarding the rest without the media would answer a different prompt than
 * the harness asked about. A part's `uuid` (vLLM reuses cached media features by it, whatever the
 * part holds) is dropped like an unknown key. Messages that change are new objects; the rest, and
 * the array when none changes, are the request's own (the byte path copies them: body-splice.ts).
 */
export function trainerMessages(messages: ChatMessage[], dropped: string[]): ChatMessage[] {
  let out: ChatMessage[] | null = null;
  messages.forEach((m, i) => {
    if (!isRecord(m)) return;
    const allowed = MESSAGE_KEYS[String(m.role)] ?? MESSAGE_KEYS.user!;
    let next: ChatMessage | null = null;
    for (const key of Object.keys(m)) {
      if (allowed.has(key)) continue;
      next ??= { ...m };
      delete next[key];
      note(dropped, `messages[].${key}`);
    }
    if (Array.isArray(m.content)) {
      const content = checkedParts(m.content, i, dropped);
      if (content !== m.content) (next ??= { ...m }).content = content;
    }
    if (next) (out ??= [...messages])[i] = next;
  });
  return out ?? messages;
}

function checkedParts(parts: unknown[], index: number, dropped: string[]): unknown[] {
  let out: unknown[] | null = null;
  parts.forEach((part, j) => {
    if (!isRecord(part)) return;
    const where = `messages[${index}].content[${j}]`;
    for (const key of MEDIA_URL_KEYS) {
      if (!(key in part)) continue;
      const value = part[key];
      const url = isRecord(value) ? value.url : value;
      if (typeof url !== 'string' || !/^data:/i.test(url)) {
        throw new PolarError(
          'POLAR_BAD_REQUEST',
          `${where} (${key}) names media by ${typeof url === 'string' ? `URL ${JSON.stringify(url.slice(0, 80))}` : 'no inline data'}: while the trainer owns sampling, polar forwards media only inline (a data: URI, or base64 image data), never a URL for the inference server to fetch`,
          400,
          { param: 'messages' },
        );
      }
    }
    for (const key of EMBED_KEYS) {
      if (key in part || part.type === key) {
        throw new PolarError(
          'POLAR_BAD_REQUEST',
          `${where} is a ${key} part: while the trainer owns sampling, polar forwards text and inline media only, not tensors no tokenizer can reproduce`,
          400,
          { param: 'messages' },
        );
      }
    }
    if ('uuid' in part) {
      const { uuid: _, ...rest } = part;
      (out ??= [...parts])[j] = rest;
      note(dropped, 'messages[].content[].uuid');
    }
  });
  return out ?? parts;
}

function note(dropped: string[], name: string): void {
  if (!dropped.includes(name)) dropped.push(name);
}

/**
 * The record of one call (migration 11): the policy in force, what went upstream (`body`, as sent),
 * and what the policy changed. `text` turns the byte path's lazy strings into text (wire-body.ts).
 */
export function samplingRecord(
  policy: SamplingPolicy,
  pinned: { req: CanonicalRequest; dropped: readonly unknown[]; offPolicy: readonly unknown[] },
  body: Record<string, unknown>,
  text: (v: unknown) => unknown = (v) => v,
): SamplingRecord {
  return {
    policy: policy.mode,
    ...sentSampling(body),
    dropped: pinned.dropped.map((k) => text(k) as string),
    off_policy: pinned.offPolicy.map((k) => text(k) as string),
    reference: { temperature: policy.temperature, top_p: policy.topP },
    thinking: text(pinned.req.thinking ?? null) as boolean | null,
  };
}

/** The fields of a pass-through request that take its sampling away from the trainer's. */
export function offPolicyFields(body: Record<string, unknown>, policy: Pick<SamplingPolicy, 'temperature' | 'topP'>): string[] {
  const out: string[] = [];
  if (typeof body.temperature === 'number' && body.temperature !== policy.temperature) out.push('temperature');
  if (typeof body.top_p === 'number' && body.top_p !== policy.topP) out.push('top_p');
  for (const key of OFF_POLICY_FIELDS) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    if (NEUTRAL_VALUES[key]?.includes(v)) continue;
    if (key === 'chat_template_kwargs' && isRecord(v) && Object.keys(v).every((k) => k === 'enable_thinking')) continue;
    out.push(key);
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null && choice !== 'auto' && choice !== 'none') out.push('tool_choice');
  return out;
}

/**
 * The sampling parameters of a body as it goes upstream: OpenAI Chat and vLLM completions keep
 * them at the top level, SGLang's /generate under `sampling_params` (max_new_tokens, sampling_seed).
 */
export function sentSampling(body: Record<string, unknown>): Pick<SamplingRecord, 'temperature' | 'top_p' | 'top_k' | 'max_tokens' | 'seed'> {
  const p = isRecord(body.sampling_params) ? body.sampling_params : body;
  return {
    temperature: num(p.temperature),
    top_p: num(p.top_p),
    top_k: num(p.top_k),
    max_tokens: num(p.max_new_tokens) ?? num(p.max_completion_tokens) ?? num(p.max_tokens),
    seed: num(p.sampling_seed) ?? num(p.seed),
  };
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * Why a recorded call was not sampled with the run's parameters, or null when it was (or when it
 * predates the record: calls captured before migration 11 carry none and are not judged).
 * `run`: the rollout's configured pair, where the session belongs to one; else the call's own
 * pinned values (trainer) or the trainer's defaults (pass-through).
 */
export function offPolicyReason(record: SamplingRecord | null, run?: { temperature?: number; topP?: number } | null): string | null {
  if (!record) return null;
  if (record.off_policy.length > 0) return `sent its own ${record.off_policy.join(', ')} (pass-through)`;
  const temperature =
    run?.temperature ?? record.reference?.temperature ?? (record.policy === 'trainer' ? record.temperature : TRAINER_TEMPERATURE) ?? TRAINER_TEMPERATURE;
  const topP = run?.topP ?? record.reference?.top_p ?? (record.policy === 'trainer' ? record.top_p : TRAINER_TOP_P) ?? TRAINER_TOP_P;
  const differ: string[] = [];
  if (record.temperature !== null && record.temperature !== temperature) differ.push(`temperature ${record.temperature} (run: ${temperature})`);
  if (record.top_p !== null && record.top_p !== topP) differ.push(`top_p ${record.top_p} (run: ${topP})`);
  return differ.length > 0 ? `sampled with ${differ.join(', ')}` : null;
}

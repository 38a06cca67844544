import { CREATED, tokenText, vllmError, type ReplyContext } from './context.js';
import type { ChatBody } from './render.js';
import type { SampledReply } from './sampler.js';
import type { SseReply } from './sse.js';

/**
 * vLLM's `/v1/chat/completions` reply: the message as its reasoning and tool parsers would split
 * the sampled text, `logprobs.content[]`, `choices[].token_ids` and top-level `prompt_token_ids`
 * with `return_token_ids`. With `nemoRl`, `logprobs: true` also puts `prompt_token_ids`,
 * `generation_token_ids` and `generation_log_probs` on the message, as NeMo-RL's server does
 * (its server returns tokens as ids; a request that turns that off gets no token fields).
 */
export function chatCompletion(ctx: ReplyContext, chat: ChatBody, id: string, promptIds: number[], reply: SampledReply, nemoRl: boolean) {
  const message: Record<string, unknown> = { role: 'assistant', content: reply.content ?? (reply.toolCalls.length > 0 ? null : '') };
  if (reply.reasoning !== null) message[ctx.reasoningField] = reply.reasoning;
  if (reply.toolCalls.length > 0) {
    message.tool_calls = reply.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  }
  if (nemoRl && chat.logprobs && chat.return_tokens_as_token_ids !== false) {
    // nemo_rl/models/generation/vllm/utils.py attach_token_information_to_chat_response_choices.
    message.prompt_token_ids = promptIds;
    message.generation_token_ids = reply.ids;
    message.generation_log_probs = reply.logprobs.map((lp) => Math.max(lp, -9999));
  }
  const choice: Record<string, unknown> = {
    index: 0,
    message,
    logprobs: chat.logprobs ? { content: logprobEntries(ctx, chat, reply.ids, reply.logprobs) } : null,
    finish_reason: reply.finishReason,
    stop_reason: null,
  };
  if (chat.return_token_ids) choice.token_ids = reply.ids;
  return {
    id,
    object: 'chat.completion',
    created: CREATED,
    model: ctx.model,
    choices: [choice],
    service_tier: null,
    system_fingerprint: null,
    usage: {
      prompt_tokens: promptIds.length,
      total_tokens: promptIds.length + reply.ids.length,
      completion_tokens: reply.ids.length,
      prompt_tokens_details: null,
    },
    prompt_logprobs: null,
    prompt_token_ids: chat.return_token_ids ? promptIds : null,
    kv_transfer_params: null,
  };
}

/** The same reply streamed: a role chunk (with `prompt_token_ids`), the pieces, usage. */
export function chatStream(ctx: ReplyContext, chat: ChatBody, id: string, promptIds: number[], reply: SampledReply): SseReply {
  const base = { id, object: 'chat.completion.chunk', created: CREATED, model: ctx.model };
  const pieces = ctx.qwen ? streamPieces(ctx, reply) : [{ ids: reply.ids, delta: { content: 'x'.repeat(reply.ids.length) } }];
  let offset = 0;
  const body = pieces.map((piece, p) => {
    const last = p === pieces.length - 1;
    const lps = reply.logprobs.slice(offset, offset + piece.ids.length);
    offset += piece.ids.length;
    const choice: Record<string, unknown> = {
      index: 0,
      delta: piece.delta,
      logprobs: chat.logprobs ? { content: logprobEntries(ctx, chat, piece.ids, lps) } : null,
      finish_reason: last ? reply.finishReason : null,
    };
    if (last) choice.stop_reason = null;
    if (chat.return_token_ids) choice.token_ids = piece.ids;
    return { ...base, choices: [choice] };
  });
  const usage = { prompt_tokens: promptIds.length, total_tokens: promptIds.length + reply.ids.length, completion_tokens: reply.ids.length };
  return {
    head: [
      {
        ...base,
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
        prompt_token_ids: chat.return_token_ids ? promptIds : null,
      },
    ],
    body,
    tail: chat.stream_options?.include_usage ? [{ ...base, choices: [], usage }] : [],
    errorEvent: vllmError('generation failed: CUDA error', 'InternalServerError', 500),
    brokenData: '{"id": "chatcmpl-broken", "choices": [',
  };
}

function logprobEntries(ctx: ReplyContext, chat: ChatBody, ids: number[], lps: number[]) {
  return ids.map((tid, i) => {
    const token = tokenText(ctx, tid, chat.return_tokens_as_token_ids);
    return { token, logprob: lps[i]!, bytes: [...Buffer.from(token, 'utf8')], top_logprobs: [] };
  });
}

/** Cuts a reply into streamed chunks the way vLLM's incremental detokenizer and parsers would. */
function streamPieces(ctx: ReplyContext, reply: SampledReply) {
  const q = ctx.qwen!;
  const chunkTokens = ctx.chunkTokens;
  const pieces: { ids: number[]; delta: Record<string, unknown> }[] = [];
  for (const seg of reply.segments) {
    let emitted = '';
    for (let i = 0; i < seg.ids.length; i += chunkTokens) {
      const ids = seg.ids.slice(i, i + chunkTokens);
      const end = i + chunkTokens >= seg.ids.length;
      let delta: Record<string, unknown> = {};
      if (seg.kind === 'content' || seg.kind === 'reasoning') {
        let text = q.decode(seg.ids.slice(0, i + ids.length));
        // Hold back a split UTF-8 sequence until its last byte arrives, as vLLM's detokenizer does.
        if (!end) while (text.endsWith('\uFFFD')) text = text.slice(0, -1);
        const piece = text.slice(emitted.length);
        emitted = text;
        if (piece) delta = seg.kind === 'content' ? { content: piece } : { [ctx.reasoningField]: piece };
      } else if (seg.kind === 'tool' && end) {
        const call = reply.toolCalls[seg.toolIndex ?? 0]!;
        delta = { tool_calls: [{ index: seg.toolIndex ?? 0, id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }] };
      }
      pieces.push({ ids, delta });
    }
  }
  return pieces;
}

import { policyLogprobs, type PolicyShift } from './policy.js';
import type { Qwen3 } from './qwen3.js';

/** What the reference model "decides" to say for one call. */
export interface ScriptedReply {
  reasoning?: string;
  content?: string;
  toolCalls?: { name: string; arguments: Record<string, unknown> }[];
}

export type SegmentKind = 'markup' | 'reasoning' | 'content' | 'tool';

/** A run of sampled tokens and what vLLM's parsers would make of them. */
export interface Segment {
  kind: SegmentKind;
  ids: number[];
  /** For `tool`: the index of the call it completes. */
  toolIndex?: number;
}

export interface SampledReply {
  segments: Segment[];
  ids: number[];
  logprobs: number[];
  finishReason: 'stop' | 'length' | 'tool_calls';
  reasoning: string | null;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  /** How many sampled tokens are non-canonical splits (must be > 0 for a meaningful test). */
  splits: number;
}

/**
 * Encodes text the way a sampler might emit it, not the way a tokenizer would: every `splitEvery`-th
 * multi-character token is replaced by two tokens whose byte strings concatenate to it. The text
 * decodes identically, but re-tokenizing it gives different ids, so any re-tokenization is caught.
 */
export function sampleIds(qwen: Qwen3, text: string, splitEvery: number, counter: { splits: number }): number[] {
  const canonical = qwen.encode(text);
  const out: number[] = [];
  canonical.forEach((id, i) => {
    const token = qwen.tokenString(id);
    if (splitEvery > 0 && token && token.length >= 2 && i % splitEvery === 0) {
      for (let cut = 1; cut < token.length; cut++) {
        const a = qwen.tokenId(token.slice(0, cut));
        const b = qwen.tokenId(token.slice(cut));
        if (a !== undefined && b !== undefined) {
          out.push(a, b);
          counter.splits++;
          return;
        }
      }
    }
    out.push(id);
  });
  return out;
}

/** Deterministic logprobs with full float64 mantissas, all finite and < 0. */
export function logprobsFor(count: number, seed: number): number[] {
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    const x = Math.sin((seed + 1) * 12.9898 + (i + 1) * 78.233) * 43758.5453;
    out[i] = -((x - Math.floor(x)) * 6 + 1e-9);
  }
  return out;
}

/**
 * Renders a reply in Qwen3's own output format (`<think>…</think>`, Hermes `<tool_call>` JSON, then
 * `<|im_end|>`), samples ids with non-canonical splits, and truncates at `maxTokens` as a real
 * server would (no end-of-turn token, finish_reason `length`).
 */
export function sampleReply(
  qwen: Qwen3,
  reply: ScriptedReply,
  options: { maxTokens?: number; splitEvery?: number; seed?: number; callId?: string; context?: readonly number[]; shift?: PolicyShift },
): SampledReply {
  const counter = { splits: 0 };
  const splitEvery = options.splitEvery ?? 3;
  const segments: Segment[] = [];
  const push = (kind: SegmentKind, text: string, toolIndex?: number) => {
    if (!text) return;
    const ids = kind === 'markup' ? qwen.encode(text) : sampleIds(qwen, text, splitEvery, counter);
    segments.push(toolIndex === undefined ? { kind, ids } : { kind, ids, toolIndex });
  };
  if (reply.reasoning !== undefined) {
    push('markup', '<think>\n');
    push('reasoning', reply.reasoning);
    push('markup', '\n</think>\n\n');
  }
  if (reply.content) push('content', reply.content);
  const toolCalls = (reply.toolCalls ?? []).map((call, i) => ({
    id: `chatcmpl-tool-${options.callId ?? 'x'}${i}`,
    name: call.name,
    arguments: JSON.stringify(call.arguments),
  }));
  toolCalls.forEach((call, i) => {
    const prefix = i === 0 && !reply.content ? '' : '\n';
    push('markup', `${prefix}<tool_call>\n`);
    push('tool', `{"name": ${JSON.stringify(call.name)}, "arguments": ${call.arguments}}`, i);
    push('markup', '\n</tool_call>');
  });
  segments.push({ kind: 'markup', ids: [qwen.eosId] });

  let ids = segments.flatMap((s) => s.ids);
  let finishReason: SampledReply['finishReason'] = toolCalls.length > 0 ? 'tool_calls' : 'stop';
  let truncatedSegments = segments;
  if (options.maxTokens !== undefined && ids.length > options.maxTokens) {
    finishReason = 'length';
    ids = ids.slice(0, options.maxTokens);
    truncatedSegments = [];
    let left = options.maxTokens;
    for (const s of segments) {
      if (left <= 0) break;
      const take = s.ids.slice(0, left);
      // A tool call cut short is not a tool call: what survived is plain content.
      truncatedSegments.push({ kind: s.kind === 'tool' ? 'content' : s.kind, ids: take });
      left -= take.length;
    }
  }
  const textOf = (kind: SegmentKind) => {
    const parts = truncatedSegments.filter((s) => s.kind === kind);
    return parts.length > 0 ? parts.map((s) => qwen.decode(s.ids)).join('') : null;
  };
  return {
    segments: truncatedSegments,
    ids,
    // With the prompt known, the policy's own logprobs (policy.ts), which re-scoring reproduces.
    logprobs: options.context ? policyLogprobs(options.context, ids, options.shift) : logprobsFor(ids.length, options.seed ?? 0),
    finishReason,
    reasoning: textOf('reasoning'),
    content: textOf('content'),
    toolCalls: finishReason === 'length' ? [] : toolCalls,
    splits: counter.splits,
  };
}

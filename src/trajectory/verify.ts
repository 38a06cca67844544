import { digestOfTokens } from '../core/token-digest.js';
import type { TokenIds } from '../core/tokens.js';
import type { Logprobs } from './ids.js';
import type { TokenText, Trajectory } from './types.js';

/** One broken promise, named precisely enough to find: the session, the call or trace, the position. */
export interface Violation {
  session: string;
  check: string;
  message: string;
  requestId?: string;
  traceIndex?: number;
  position?: number;
}

/** A recorded call as verification reads it. */
export interface RecordedCall {
  requestId: string;
  tokenSource: string;
  promptIds: TokenIds | null;
  sampledIds: TokenIds | null;
  logprobs: Logprobs | null;
  usage: { prompt_tokens?: number; completion_tokens?: number } | null;
  /** The digest taken when the call was captured; undefined where the caller does not check it. */
  tokenDigest?: string | null;
}

/**
 * The stored token data is what the upstream sent: its digest now equals the one taken at capture.
 * Catches any change after capture (a flipped or swapped id, a truncated array, a logprob's last
 * bit), however the rows are laid out.
 */
export function verifyDigest(session: string, call: RecordedCall): Violation[] {
  if (call.tokenDigest === undefined) return [];
  const has = call.promptIds || call.sampledIds || call.logprobs;
  if (!has) return [];
  if (call.tokenDigest === null)
    return [
      {
        session,
        requestId: call.requestId,
        check: 'digest',
        message: 'the call has token data but no capture digest, so nothing proves it is what the upstream sent',
      },
    ];
  const now = digestOfTokens(call);
  return now === call.tokenDigest
    ? []
    : [
        {
          session,
          requestId: call.requestId,
          check: 'digest',
          message: `the stored ids and logprobs are not what the upstream sent: digest ${now.slice(0, 16)}… but ${call.tokenDigest.slice(0, 16)}… at capture`,
        },
      ];
}

/** Per-call checks: what the server sent is internally consistent and came with its ids. */
export function verifyCall(session: string, call: RecordedCall): Violation[] {
  const v: Violation[] = [];
  const at = (check: string, message: string, position?: number) =>
    v.push({ session, requestId: call.requestId, check, message, ...(position !== undefined ? { position } : {}) });
  if (call.tokenSource !== 'upstream') at('token_source', `token_source is ${call.tokenSource}: these tokens are not the server's and must not be trained on`);
  if (!call.promptIds || !call.sampledIds) {
    at('ids', 'the call has no prompt or sampled ids');
    return v;
  }
  if (!call.logprobs) at('logprobs', 'the call has no logprobs');
  else if (call.logprobs.length !== call.sampledIds.length) at('logprobs', `${call.sampledIds.length} sampled ids but ${call.logprobs.length} logprobs`);
  const lps = call.logprobs;
  if (lps)
    for (let i = 0; i < lps.length; i++) {
      const lp = lps[i]!;
      if (!Number.isFinite(lp) || lp > 0) at('logprobs', `logprob ${lp} is not a finite value <= 0`, i);
    }
  if (call.usage?.prompt_tokens !== undefined && call.usage.prompt_tokens !== call.promptIds.length) {
    at('usage', `usage.prompt_tokens ${call.usage.prompt_tokens} but ${call.promptIds.length} prompt ids`);
  }
  if (call.usage?.completion_tokens !== undefined && call.usage.completion_tokens !== call.sampledIds.length) {
    at('usage', `usage.completion_tokens ${call.usage.completion_tokens} but ${call.sampledIds.length} sampled ids`);
  }
  return v;
}

/** What the text checks read: the reply as the harness got it, and the messages sent upstream. */
export interface CallText {
  requestId: string;
  promptIds: readonly number[];
  sampledIds: readonly number[];
  assistantMessage: { content?: unknown; reasoning_content?: unknown; tool_calls?: { function?: { name?: string } }[] } | null;
  messages: { role: string; content?: unknown }[];
}

/**
 * With a tokenizer: the sampled ids decode to the reply the harness received (its text, reasoning
 * and tool-call names), and the prompt ids decode to a prompt containing every message's text.
 * Earlier reasoning is not required in the prompt: templates such as Qwen3's drop it by design.
 */
export function verifyCallText(session: string, call: CallText, text: TokenText): Violation[] {
  const v: Violation[] = [];
  const sampled = text.decode(call.sampledIds);
  const m = call.assistantMessage;
  if (m) {
    const pieces: [string, unknown][] = [
      ['content', m.content],
      ['reasoning', m.reasoning_content],
      ...(m.tool_calls ?? []).map((c): [string, unknown] => ['tool call', c.function?.name]),
    ];
    for (const [what, value] of pieces) {
      if (typeof value === 'string' && value.trim() && !sampled.includes(value.trim())) {
        v.push({ session, requestId: call.requestId, check: 'text', message: `the sampled ids do not decode to the reply's ${what}` });
      }
    }
  }
  const prompt = text.decode(call.promptIds);
  call.messages.forEach((message, i) => {
    for (const part of textParts(message.content)) {
      if (!prompt.includes(part))
        v.push({
          session,
          requestId: call.requestId,
          check: 'prompt-text',
          message: `the prompt ids do not contain message ${i} (${message.role})`,
          position: i,
        });
    }
  });
  return v;
}

function textParts(content: unknown): string[] {
  if (typeof content === 'string') return content.trim() ? [content.trim()] : [];
  if (!Array.isArray(content)) return [];
  return content.flatMap((p) =>
    p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? textParts((p as { text: string }).text) : [],
  );
}

/**
 * Per-trace checks against the recordings: the mask-1 runs are, in order, exactly the sampled ids
 * and logprobs of the trace's calls; mask-0 tokens carry no logprob; the trace's prompt is its first
 * call's prompt; and (faithful traces) the tokens before each call's run are exactly the prompt ids
 * that call recorded — the context the model really saw.
 */
export function verifyTrace(trace: Trajectory, calls: ReadonlyMap<string, RecordedCall>, options: { allowRerender?: boolean } = {}): Violation[] {
  const v: Violation[] = [];
  const at = (check: string, message: string, extra: { requestId?: string; position?: number } = {}) =>
    v.push({ session: trace.session_id, traceIndex: trace.trace_index, check, message, ...extra });
  const n = trace.response_ids.length;
  if (trace.loss_mask.length !== n) at('shape', `${n} response ids but ${trace.loss_mask.length} mask entries`);
  if (trace.response_logprobs && trace.response_logprobs.length !== n) at('shape', `${n} response ids but ${trace.response_logprobs.length} logprobs`);
  if (v.length > 0) return v;
  const lps = trace.response_logprobs;
  if (lps)
    for (let i = 0; i < n; i++) {
      if (trace.loss_mask[i] === 0 && lps[i] !== 0) at('mask', `context token carries logprob ${lps[i]}`, { position: i });
    }
  const first = calls.get(trace.request_ids[0] ?? '');
  // Where the trace's prompt first differs from the first call's (-1: nowhere); the first call's
  // context check below is the same comparison, so it is made once.
  const firstPrompt = first?.promptIds ? contextDifference(trace, 0, first.promptIds) : -1;
  if (firstPrompt >= 0)
    at('prompt', "prompt_ids differ from the first call's recorded prompt ids", {
      requestId: first!.requestId,
      position: firstPrompt,
    });
  let pos = 0;
  for (const [k, id] of trace.request_ids.entries()) {
    const call = calls.get(id);
    if (!call?.sampledIds || !call.promptIds) {
      at('calls', `call ${id} is not a recorded call with token ids`, { requestId: id });
      return v;
    }
    // Context before this call's run: mask-0 tokens (none before the first call's run).
    const runStart = k === 0 ? 0 : nextSampled(trace.loss_mask, pos);
    if (!options.allowRerender) {
      const differs = k === 0 && call === first ? firstPrompt : contextDifference(trace, runStart, call.promptIds);
      if (differs >= 0) at('context', "the tokens before this call's sampled ids are not the prompt it recorded", { requestId: id, position: differs });
    }
    const sampled = call.sampledIds;
    const recordedLps = call.logprobs;
    for (let i = 0; i < sampled.length; i++) {
      const p = runStart + i;
      if (p >= n || trace.loss_mask[p] !== 1 || trace.response_ids[p] !== sampled[i]) {
        at('sampled', `position ${p} should be sampled id ${sampled[i]} (mask 1) of this call`, { requestId: id, position: p });
        return v;
      }
      if (lps && recordedLps && !sameBits(lps[p]!, recordedLps[i]!)) {
        at('logprob', `logprob ${lps[p]} is not the recorded ${recordedLps[i]}`, { requestId: id, position: p });
      }
    }
    pos = runStart + call.sampledIds.length;
  }
  if (pos < n && trace.loss_mask.slice(pos).some((m) => m === 1)) at('sampled', 'mask-1 tokens that belong to no call', { position: pos });
  return v;
}

/** Each usable call in exactly one trace. */
export function verifyCoverage(session: string, usable: readonly string[], traces: readonly Trajectory[]): Violation[] {
  const count = new Map<string, number>();
  for (const t of traces) for (const id of t.request_ids) count.set(id, (count.get(id) ?? 0) + 1);
  const v: Violation[] = [];
  for (const id of usable) {
    const c = count.get(id) ?? 0;
    if (c !== 1) v.push({ session, requestId: id, check: 'coverage', message: c === 0 ? 'recorded call is in no trace' : `recorded call is in ${c} traces` });
  }
  const known = new Set(usable);
  for (const id of count.keys())
    if (!known.has(id)) v.push({ session, requestId: id, check: 'coverage', message: 'trace names a call that is not a usable recording of this session' });
  return v;
}

/**
 * Where the trace's tokens before `runStart` (its prompt, then its response up to there) first
 * differ from `prompt`; -1 when they are the same. Compared in place: a merged trace is long.
 */
function contextDifference(trace: Trajectory, runStart: number, prompt: TokenIds): number {
  const head = trace.prompt_ids.length;
  const length = head + runStart;
  const n = Math.min(length, prompt.length);
  // Two plain loops (prompt, then responses): no branch per token on which array it is in.
  const inPrompt = Math.min(n, head);
  const ids = trace.prompt_ids;
  for (let i = 0; i < inPrompt; i++) if (ids[i] !== prompt[i]) return i;
  const responses = trace.response_ids;
  for (let i = inPrompt; i < n; i++) if (responses[i - head] !== prompt[i]) return i;
  return length === prompt.length ? -1 : n;
}

function nextSampled(mask: readonly (0 | 1)[], from: number): number {
  let i = from;
  while (i < mask.length && mask[i] === 0) i++;
  return i;
}

/** Logprobs compare as float64 bits: a value rounded anywhere on the way is a violation. */
function sameBits(a: number, b: number): boolean {
  return Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
}

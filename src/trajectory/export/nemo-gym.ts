import { isRecord, type ChatMessage } from '../../core/chat.js';
import type { RequestRecord } from '../../store/requests.js';
import type { Trajectory } from '../types.js';

/**
 * A NeMo Gym rollout result (what an agent server's `POST /run` returns) for one trace:
 * `responses_create_params` (the first call's conversation and tools, as Responses input), a
 * `response` whose `output` items are every call's reasoning, message and function calls followed
 * by the tool outputs the harness sent back, and `reward`. The last output item of each model call
 * carries `prompt_token_ids`, `generation_token_ids` and `generation_log_probs`, exactly as
 * recorded. NeMo-RL asserts that each sample is one append-only chain (the tokens so far are a
 * prefix of the next call's prompt), which is what a faithful prefix-merged trace is — so the
 * export is one result per trace, not per session: a session with breaks gives several.
 */
export interface NemoGymResult {
  responses_create_params: { input: unknown[]; tools: unknown[] };
  response: { id: string; object: 'response'; status: 'completed'; output: Record<string, unknown>[] };
  reward: number | null;
  polar: { session_id: string; agent_id: string; trace_index: number; request_ids: string[] };
}

export function nemoGymResult(trace: Trajectory, calls: readonly RequestRecord[]): NemoGymResult | null {
  const first = calls[0];
  const firstRequest = first ? upstreamBody(first) : null;
  if (!first || !firstRequest) return null;
  const output: Record<string, unknown>[] = [];
  for (const [k, call] of calls.entries()) {
    const message = isRecord(call.assistantMessage) ? (call.assistantMessage as ChatMessage) : null;
    if (!message || !call.promptIds || !call.sampledIds) return null;
    const items = modelItems(message, `${trace.session_id}_${trace.trace_index}_${k}`);
    Object.assign(items[items.length - 1]!, {
      prompt_token_ids: call.promptIds,
      generation_token_ids: call.sampledIds,
      generation_log_probs: call.logprobs ?? call.sampledIds.map(() => 0),
    });
    output.push(...items);
    // The tool outputs the harness sent back for these calls, from the next call's request.
    const next = calls[k + 1] ? upstreamBody(calls[k + 1]!) : null;
    const ids = new Set((message.tool_calls ?? []).map((c) => c.id));
    for (const m of next?.messages ?? []) {
      if (m.role === 'tool' && typeof m.tool_call_id === 'string' && ids.has(m.tool_call_id)) {
        output.push({ type: 'function_call_output', call_id: m.tool_call_id, output: typeof m.content === 'string' ? m.content : JSON.stringify(m.content) });
      }
    }
  }
  return {
    responses_create_params: { input: firstRequest.messages.map(inputItem), tools: (firstRequest.tools ?? []).map(responsesTool) },
    response: { id: `resp_${trace.session_id}_${trace.trace_index}`, object: 'response', status: 'completed', output },
    reward: trace.reward,
    polar: { session_id: trace.session_id, agent_id: trace.agent_id, trace_index: trace.trace_index, request_ids: trace.request_ids },
  };
}

function upstreamBody(call: RequestRecord): { messages: ChatMessage[]; tools?: unknown[] } | null {
  if (!call.upstreamRequest) return null;
  const body = JSON.parse(call.upstreamRequest) as { messages?: ChatMessage[]; tools?: unknown[] };
  return Array.isArray(body.messages) ? (body as { messages: ChatMessage[]; tools?: unknown[] }) : null;
}

/** One model call's output items: reasoning, message, function calls (at least one item). */
function modelItems(message: ChatMessage, idBase: string): Record<string, unknown>[] {
  const items: Record<string, unknown>[] = [];
  if (typeof message.reasoning_content === 'string' && message.reasoning_content) {
    items.push({ type: 'reasoning', id: `rs_${idBase}`, summary: [{ type: 'summary_text', text: message.reasoning_content }] });
  }
  const text = typeof message.content === 'string' ? message.content : '';
  if (text || !message.tool_calls?.length) {
    items.push({ type: 'message', id: `msg_${idBase}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] });
  }
  for (const [i, call] of (message.tool_calls ?? []).entries()) {
    items.push({ type: 'function_call', id: `fc_${idBase}_${i}`, call_id: call.id, name: call.function.name, arguments: call.function.arguments, status: 'completed' });
  }
  return items;
}

function inputItem(m: ChatMessage): Record<string, unknown> {
  return { role: m.role, content: typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '') };
}

function responsesTool(tool: unknown): unknown {
  const fn = isRecord(tool) && isRecord(tool.function) ? tool.function : {};
  return { type: 'function', name: fn.name, description: fn.description ?? '', parameters: fn.parameters ?? { type: 'object', properties: {} } };
}

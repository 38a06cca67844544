import { isRecord, type ChatMessage } from '../../core/chat.js';
import type { RequestRecord } from '../../store/requests.js';
import { callConversation, isConversation, type Conversation, type ResponseLookup } from '../conversation.js';
import type { Trajectory } from '../types.js';
import { responsesInputItems, responsesTool, type ResponsesItem, type ResponsesTool } from './responses-items.js';

/**
 * The name polar's agent has in NeMo Gym: its folder `responses_api_agents/<name>/` (train/gym-agent/wiring.ts)
 * and the `agent_ref.name` of every rollouts.jsonl line (gym-rollouts.ts).
 */
export const AGENT_NAME = 'polar_agent';

/**
 * A NeMo Gym rollout result (what an agent server's `POST /run` returns) for one trace, in the
 * shapes Gym validates (`nemo_gym/openai_utils.py`, Gym `07d6b0d`):
 * - `responses_create_params`: the first call's conversation as Responses input items (`message`
 *   with `input_text` parts, earlier assistant turns as `reasoning` / `message` with `output_text`
 *   / `function_call` items, tool results as `function_call_output`) and its tools as function
 *   tools; nothing else, since Gym forbids extra keys there;
 * - `response`: a Responses object (`id`, `object`, `created_at`, `model`, `status`, `output`,
 *   `usage`, and the `parallel_tool_calls` / `tool_choice` / `tools` the Response model requires)
 *   whose `output` is every call's items followed by what the harness added before the next call
 *   (tool outputs, new user messages);
 * - `reward` (0 when the session was never rewarded; `polar.rewarded` says which).
 * The last output item of each model call carries `prompt_token_ids`, `generation_token_ids` and
 * `generation_log_probs`, exactly as recorded. NeMo-RL asserts each sample is one append-only chain
 * (the tokens so far prefix the next call's prompt), which a faithful prefix-merged trace is; the
 * export writes one per sample whose main agent is one such trace (gym-rollouts.ts, select.ts).
 */
export interface NemoGymResult {
  responses_create_params: { input: ResponsesItem[]; tools: ResponsesTool[] };
  response: {
    id: string;
    object: 'response';
    created_at: number;
    model: string;
    status: 'completed' | 'incomplete';
    output: ResponsesItem[];
    usage: {
      input_tokens: number;
      input_tokens_details: { cached_tokens: number };
      output_tokens: number;
      output_tokens_details: { reasoning_tokens: number };
      total_tokens: number;
    };
    parallel_tool_calls: boolean;
    tool_choice: 'auto';
    tools: ResponsesTool[];
  };
  reward: number;
  polar: { session_id: string; agent_id: string; trace_index: number; request_ids: string[]; rewarded: boolean };
}

export function nemoGymResult(trace: Trajectory, calls: readonly RequestRecord[], lookup?: ResponseLookup): NemoGymResult | { problem: string } {
  const conversations: Conversation[] = [];
  for (const call of calls) {
    if (!isRecord(call.assistantMessage)) return { problem: 'no reply recorded as an assistant message (recorded before polar kept them)' };
    if (!call.promptIds || !call.sampledIds) return { problem: 'a call has no server token ids' };
    const conversation = callConversation(call, lookup);
    if (!isConversation(conversation)) return conversation;
    conversations.push(conversation);
  }
  const first = conversations[0];
  if (!first) return { problem: 'the trace has no calls' };
  const output: ResponsesItem[] = [];
  let usage = { input: 0, output: 0 };
  for (const [k, call] of calls.entries()) {
    const message = call.assistantMessage as ChatMessage;
    const ids = `${trace.session_id}_${trace.trace_index}_${k}`;
    const items = responsesInputItems([message], ids);
    if (items.length === 0)
      items.push({
        type: 'message',
        id: `msg_${ids}_0`,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: '', annotations: [] }],
      });
    Object.assign(items[items.length - 1]!, {
      prompt_token_ids: call.promptIds,
      generation_token_ids: call.sampledIds,
      generation_log_probs: call.logprobs ?? call.sampledIds!.map(() => 0),
    });
    output.push(...items);
    usage = { input: usage.input + call.promptIds!.length, output: usage.output + call.sampledIds!.length };
    const next = conversations[k + 1];
    if (next) output.push(...responsesInputItems(addedBefore(conversations[k]!, message, next), `${ids}_next`));
  }
  const tools = first.tools.map(responsesTool);
  const last = calls[calls.length - 1]!;
  return {
    responses_create_params: { input: responsesInputItems(first.messages, `${trace.session_id}_${trace.trace_index}_in`), tools },
    response: {
      id: `resp_${trace.session_id}_${trace.trace_index}`,
      object: 'response',
      created_at: Math.floor(calls[0]!.startedAt / 1000),
      model: calls[0]!.servedModel ?? calls[0]!.requestedModel ?? 'unknown',
      status: last.finishReason === 'length' ? 'incomplete' : 'completed',
      output,
      usage: {
        input_tokens: usage.input,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: usage.output,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: usage.input + usage.output,
      },
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools,
    },
    reward: trace.reward ?? 0,
    polar: {
      session_id: trace.session_id,
      agent_id: trace.agent_id,
      trace_index: trace.trace_index,
      request_ids: trace.request_ids,
      rewarded: trace.reward !== null,
    },
  };
}

/**
 * The messages the harness added between a call and the next one in the same trace: everything
 * after the call's own messages and its reply, when the next request repeats them; else only the
 * tool results that answer the reply's tool calls.
 */
function addedBefore(current: Conversation, reply: ChatMessage, next: Conversation): ChatMessage[] {
  const echoed = current.messages.length + 1;
  const echoedReply = next.messages[echoed - 1];
  if (next.messages.length >= echoed && echoedReply?.role === 'assistant') return next.messages.slice(echoed);
  const ids = new Set((reply.tool_calls ?? []).map((c) => c.id));
  return next.messages.filter((m) => m.role === 'tool' && typeof m.tool_call_id === 'string' && ids.has(m.tool_call_id));
}

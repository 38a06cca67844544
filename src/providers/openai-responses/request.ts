import type { CanonicalRequest, ChatMessage } from '../../core/chat.js';
import { isRecord } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import { canonicalRequest } from '../canonical.js';
import type { DecodeContext } from '../types.js';
import { previousItems } from './previous-response.js';
import { decodeReasoning } from './reasoning-content.js';
import { callArguments, callName, chatTools } from './tools.js';
import type { ResponsesCodecState, ResponsesItem, ResponsesRequest } from './types.js';

const CALL_TYPES = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'shell_call']);
const OUTPUT_TYPES = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output', 'shell_call_output']);

/**
 * Responses input items as chat messages. Items of one model turn (reasoning, a message, tool
 * calls) join one assistant message; reasoning seen before them becomes its `reasoning_content`;
 * a tool output, a user message or new reasoning after a finished turn starts the next turn.
 * polar keeps no conversation state of its own: a `previous_response_id` is resolved from the
 * replies it recorded, and an unknown one is a 400.
 */
export function decodeResponsesRequest(body: unknown, ctx: DecodeContext): CanonicalRequest {
  if (!isRecord(body)) throw bad('request body must be a JSON object');
  const req = body as ResponsesRequest;
  if (req.model !== undefined && typeof req.model !== 'string') throw bad('`model` must be a string', 'model');
  if (req.input === undefined || (typeof req.input !== 'string' && !Array.isArray(req.input))) {
    throw bad('`input` must be a string or an array of items', 'input');
  }
  const current: ResponsesItem[] = typeof req.input === 'string' ? [{ type: 'message', role: 'user', content: req.input }] : req.input;
  let items = current;
  if (typeof req.previous_response_id === 'string' && req.previous_response_id) {
    const earlier = ctx.lookupResponse ? previousItems(req.previous_response_id, ctx.lookupResponse) : null;
    if (!earlier) {
      throw bad(
        `previous_response_id ${req.previous_response_id} is not a response this proxy recorded in this session; send the full input instead`,
        'previous_response_id',
      );
    }
    items = [...earlier, ...current];
  }

  const messages: ChatMessage[] = [];
  if (typeof req.instructions === 'string' && req.instructions) messages.push({ role: 'system', content: req.instructions });
  messages.push(...itemsToMessages(items, ctx.byteStrings));

  const out: Record<string, unknown> = { messages };
  const { tools, targets } = chatTools(Array.isArray(req.tools) ? req.tools : []);
  if (tools.length > 0) {
    out.tools = tools;
    const choice = toolChoice(req.tool_choice);
    if (choice !== undefined) out.tool_choice = choice;
    if (typeof req.parallel_tool_calls === 'boolean') out.parallel_tool_calls = req.parallel_tool_calls;
  }
  if (typeof req.max_output_tokens === 'number') out.max_tokens = req.max_output_tokens;
  if (typeof req.temperature === 'number') out.temperature = req.temperature;
  if (typeof req.top_p === 'number') out.top_p = req.top_p;
  const format = req.text?.format;
  if (isRecord(format) && format.type === 'json_schema') {
    out.response_format = { type: 'json_schema', json_schema: { name: format.name ?? 'output', schema: format.schema, strict: format.strict ?? false } };
  } else if (isRecord(format) && format.type === 'json_object') {
    out.response_format = { type: 'json_object' };
  }

  const state: ResponsesCodecState = {
    tools: targets,
    echo: {
      instructions: typeof req.instructions === 'string' ? req.instructions : null,
      tools: Array.isArray(req.tools) ? req.tools : [],
      tool_choice: req.tool_choice ?? 'auto',
      parallel_tool_calls: req.parallel_tool_calls ?? true,
      max_output_tokens: typeof req.max_output_tokens === 'number' ? req.max_output_tokens : null,
      temperature: typeof req.temperature === 'number' ? req.temperature : null,
      top_p: typeof req.top_p === 'number' ? req.top_p : null,
      previous_response_id: typeof req.previous_response_id === 'string' ? req.previous_response_id : null,
      reasoning: req.reasoning ?? null,
      store: req.store === true,
    },
  };
  const effort = req.reasoning?.effort;
  return canonicalRequest({
    model: typeof req.model === 'string' ? req.model : '',
    stream: req.stream === true,
    body: out,
    thinking: typeof effort === 'string' ? effort !== 'none' && effort !== 'minimal' : undefined,
    codecState: state,
  });
}

export function itemsToMessages(items: ResponsesItem[], byteStrings = false): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let turn: ChatMessage | null = null;
  let reasoning: string[] = [];
  const openTurn = (): ChatMessage => {
    if (!turn) {
      turn = { role: 'assistant', content: '' };
      if (reasoning.length > 0) turn.reasoning_content = reasoning.join('\n');
      reasoning = [];
      messages.push(turn);
    }
    return turn;
  };
  items.forEach((raw, i) => {
    if (!isRecord(raw)) throw bad(`input[${i}] must be an object`, 'input');
    const type = raw.type ?? (typeof raw.role === 'string' ? 'message' : undefined);
    if (type === 'message') {
      const role = String(raw.role ?? 'user');
      if (role === 'assistant') {
        // An assistant message after a finished turn's tool calls starts a new turn.
        if (turn && (turn.tool_calls?.length ?? 0) > 0) turn = null;
        const t = openTurn();
        t.content = `${String(t.content ?? '')}${contentText(raw.content)}`;
      } else {
        turn = null;
        messages.push({ role, content: userContent(raw.content) });
      }
    } else if (type === 'reasoning') {
      if (turn) turn = null;
      const text = reasoningText(raw, byteStrings);
      if (text) reasoning.push(text);
    } else if (typeof type === 'string' && CALL_TYPES.has(type)) {
      const t = openTurn();
      (t.tool_calls ??= []).push({
        id: String(raw.call_id ?? raw.id ?? `call_${i}`),
        type: 'function',
        function: { name: callName(raw), arguments: callArguments(raw) },
      });
    } else if (typeof type === 'string' && OUTPUT_TYPES.has(type)) {
      turn = null;
      messages.push({ role: 'tool', tool_call_id: String(raw.call_id ?? ''), content: outputText(raw.output) });
    } else {
      // item_reference and hosted-tool items (web search results, images) have no chat form here.
      throw bad(`input[${i}] has type ${JSON.stringify(type)}, which polar cannot pass to a local model`, 'input');
    }
  });
  return messages;
}

function reasoningText(item: Record<string, unknown>, byteStrings: boolean): string {
  const parts = (list: unknown) =>
    Array.isArray(list)
      ? list
          .filter(isRecord)
          .map((p) => (typeof p.text === 'string' ? p.text : ''))
          .filter(Boolean)
      : [];
  const content = parts(item.content);
  if (content.length > 0) return content.join('\n');
  if (typeof item.encrypted_content === 'string') {
    const decoded = decodeReasoning(item.encrypted_content, byteStrings);
    if (decoded !== null) return decoded;
  }
  return parts(item.summary).join('\n');
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(isRecord)
    .map((p) => (typeof p.text === 'string' ? p.text : typeof p.refusal === 'string' ? p.refusal : ''))
    .join('');
}

function userContent(content: unknown): unknown {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const parts = content.filter(isRecord).map((p) => {
    if (p.type === 'input_image') {
      const url = typeof p.image_url === 'string' ? p.image_url : '';
      return { type: 'image_url', image_url: { url } };
    }
    return { type: 'text', text: typeof p.text === 'string' ? p.text : '' };
  });
  if (parts.length === 1 && parts[0]!.type === 'text') return (parts[0] as { text: string }).text;
  return parts;
}

function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output))
    return output
      .filter(isRecord)
      .map((p) => (typeof p.text === 'string' ? p.text : ''))
      .join('\n');
  return output === undefined || output === null ? '' : JSON.stringify(output);
}

function toolChoice(choice: unknown): unknown {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isRecord(choice) && choice.type === 'function' && typeof choice.name === 'string') return { type: 'function', function: { name: choice.name } };
  if (isRecord(choice) && typeof choice.type === 'string' && typeof choice.name === 'string') return { type: 'function', function: { name: choice.name } };
  return undefined;
}

function bad(message: string, param?: string): PolarError {
  return new PolarError('POLAR_BAD_REQUEST', message, 400, param ? { param } : undefined);
}

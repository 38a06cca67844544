import type { ChatCompletion, ReplyRequest } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import { parseArguments, replyView } from '../reply-view.js';
import type { EncodeContext } from '../types.js';
import { encodeReasoning } from './reasoning-content.js';
import type { ResponsesCodecState, ToolKind, ToolTarget } from './types.js';

/** Ids derive from the call's id, so a response id names the recorded call (previous_response_id). */
export function responseId(ctx: EncodeContext): string {
  return `resp_${ctx.callId.replace(/^req_/, '')}`;
}

export function callIdFromResponseId(id: string): string | null {
  return id.startsWith('resp_') ? `req_${id.slice(5)}` : null;
}

export function itemId(prefix: string, ctx: EncodeContext, n: number): string {
  return `${prefix}_${ctx.callId.replace(/^req_/, '')}_${n}`;
}

export function reasoningItem(id: string, text: string) {
  return { type: 'reasoning', id, summary: [{ type: 'summary_text', text }], encrypted_content: encodeReasoning(text) };
}

export function messageItem(id: string, text: string, status: 'in_progress' | 'completed' = 'completed') {
  return { type: 'message', id, status, role: 'assistant', content: status === 'completed' ? [{ type: 'output_text', text, annotations: [] }] : [] };
}

/** A tool call as the item type its tool calls for (a model may also call a name it was not offered). */
export function callItem(id: string, call: { id: string; name: string; arguments: string }, target: ToolTarget | undefined): Record<string, unknown> {
  const kind: ToolKind = target?.kind ?? 'function';
  const args = kind === 'function' ? null : parseArguments(call.arguments);
  switch (kind) {
    case 'custom':
      return {
        type: 'custom_tool_call',
        id,
        call_id: call.id,
        name: call.name,
        input: typeof args!.input === 'string' ? args!.input : call.arguments,
        status: 'completed',
      };
    case 'local_shell':
      return {
        type: 'local_shell_call',
        id,
        call_id: call.id,
        status: 'completed',
        action: {
          type: 'exec',
          command: Array.isArray(args!.command) ? args!.command : [],
          timeout_ms: args!.timeout_ms ?? null,
          working_directory: args!.workdir ?? null,
          env: {},
          user: null,
        },
      };
    case 'shell':
      return {
        type: 'shell_call',
        id,
        call_id: call.id,
        status: 'completed',
        action: {
          commands: Array.isArray(args!.commands) ? args!.commands : [],
          timeout_ms: args!.timeout_ms ?? null,
          max_output_length: args!.max_output_length ?? null,
        },
      };
    default: {
      const item: Record<string, unknown> = {
        type: 'function_call',
        id,
        call_id: call.id,
        name: target?.name ?? call.name,
        arguments: call.arguments,
        status: 'completed',
      };
      if (target?.namespace) item.namespace = target.namespace;
      return item;
    }
  }
}

export function usageObject(promptTokens: number, completionTokens: number) {
  return {
    input_tokens: promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: promptTokens + completionTokens,
  };
}

/** The response object, as returned by `responses.create` and carried by stream events. */
export function responseObject(
  req: ReplyRequest,
  ctx: EncodeContext,
  fields: { status: 'in_progress' | 'completed' | 'incomplete' | 'failed'; output: unknown[]; usage?: unknown; error?: unknown },
) {
  const echo = (req.codecState as ResponsesCodecState).echo;
  return {
    id: responseId(ctx),
    object: 'response',
    created_at: ctx.created,
    status: fields.status,
    error: fields.error ?? null,
    incomplete_details: fields.status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    model: req.requestedModel,
    output: fields.output,
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: echo.previous_response_id,
    reasoning: echo.reasoning,
    store: echo.store,
    temperature: echo.temperature,
    text: { format: { type: 'text' } },
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_p: echo.top_p,
    truncation: 'disabled',
    usage: fields.usage ?? null,
    metadata: {},
  };
}

export function encodeResponsesResponse(done: ChatCompletion, req: ReplyRequest, tokens: CapturedTokens, ctx: EncodeContext) {
  const view = replyView(done, tokens, ctx.callId);
  const targets = (req.codecState as ResponsesCodecState).tools;
  const output: unknown[] = [];
  let n = 0;
  if (view.reasoning !== null) output.push(reasoningItem(itemId('rs', ctx, n++), view.reasoning));
  if (view.text) output.push(messageItem(itemId('msg', ctx, n++), view.text));
  for (const call of view.toolCalls) output.push(callItem(itemId('fc', ctx, n++), call, targets[call.name]));
  return responseObject(req, ctx, {
    status: view.finishReason === 'length' ? 'incomplete' : 'completed',
    output,
    usage: usageObject(view.promptTokens, view.completionTokens),
  });
}

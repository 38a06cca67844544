import { isRecord, type ChatMessage } from '../../core/chat.js';

/** An OpenAI Responses item (input or output), as NeMo Gym's models accept them. */
export type ResponsesItem = Record<string, unknown> & { type: string };

/** A Responses function tool: `name`, `parameters` and `strict` are required keys (FunctionToolParam). */
export interface ResponsesTool {
  type: 'function';
  name: string;
  description: string;
  parameters: unknown;
  strict: boolean;
}

/**
 * Chat messages as Responses items, in order:
 * - system / developer / user → `message` with `input_text` parts (and `input_image` for images);
 * - assistant → `reasoning` (its reasoning as a summary), `message` with one `output_text` part
 *   (when it has text), then one `function_call` per tool call;
 * - tool → `function_call_output`.
 * Item ids are `idBase`-derived, so the same trace always exports the same ids.
 */
export function responsesInputItems(messages: readonly ChatMessage[], idBase: string): ResponsesItem[] {
  const items: ResponsesItem[] = [];
  messages.forEach((m, i) => {
    const id = `${idBase}_${i}`;
    if (m.role === 'tool') {
      items.push({ type: 'function_call_output', call_id: String(m.tool_call_id ?? ''), output: textOf(m.content) });
    } else if (m.role === 'assistant') {
      items.push(...assistantItems(m, id));
    } else {
      const role = m.role === 'system' || m.role === 'developer' ? m.role : 'user';
      items.push({ type: 'message', role, content: inputParts(m.content) });
    }
  });
  return items;
}

function assistantItems(m: ChatMessage, id: string): ResponsesItem[] {
  const items: ResponsesItem[] = [];
  if (typeof m.reasoning_content === 'string' && m.reasoning_content) {
    items.push({ type: 'reasoning', id: `rs_${id}`, summary: [{ type: 'summary_text', text: m.reasoning_content }] });
  }
  const text = textOf(m.content);
  if (text) items.push({ type: 'message', id: `msg_${id}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] });
  for (const [k, call] of (m.tool_calls ?? []).entries()) {
    items.push({
      type: 'function_call',
      id: `fc_${id}_${k}`,
      call_id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
      status: 'completed',
    });
  }
  return items;
}

function inputParts(content: unknown): ResponsesItem[] {
  if (typeof content === 'string') return [{ type: 'input_text', text: content }];
  if (!Array.isArray(content)) return [{ type: 'input_text', text: '' }];
  const parts: ResponsesItem[] = [];
  for (const part of content) {
    if (!isRecord(part)) continue;
    if (typeof part.text === 'string') parts.push({ type: 'input_text', text: part.text });
    else if (part.type === 'image_url' && isRecord(part.image_url) && typeof part.image_url.url === 'string') {
      parts.push({ type: 'input_image', image_url: part.image_url.url, detail: 'auto' });
    }
  }
  return parts.length > 0 ? parts : [{ type: 'input_text', text: '' }];
}

/** A message's text: the string, or its text parts joined with "\n" (as vLLM joins them). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p): p is { text: string } => isRecord(p) && typeof p.text === 'string')
    .map((p) => p.text)
    .join('\n');
}

export function responsesTool(tool: unknown): ResponsesTool {
  const fn = isRecord(tool) && isRecord(tool.function) ? tool.function : isRecord(tool) ? tool : {};
  return {
    type: 'function',
    name: typeof fn.name === 'string' ? fn.name : '',
    description: typeof fn.description === 'string' ? fn.description : '',
    parameters: fn.parameters ?? { type: 'object', properties: {} },
    strict: false,
  };
}

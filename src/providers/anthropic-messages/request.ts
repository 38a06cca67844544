import type { CanonicalRequest, ChatMessage, ChatToolCall } from '../../core/chat.js';
import { canonicalRequest } from '../canonical.js';
import { isRecord } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import type { AnthropicBlock, AnthropicCodecState, AnthropicRequest, AnthropicTextBlock, AnthropicToolResultBlock } from './types.js';

/**
 * Claude Code's per-request attribution line (`x-anthropic-billing-header: cc_version=…; cch=…;`)
 * changes every turn; upstream it would defeat prefix caching and break prefix merging, so it is
 * removed from what goes upstream. The original request in the database keeps it.
 */
const BILLING_LINE = /^x-anthropic-billing-header:[^\n]*(\n|$)/gm;

export function decodeAnthropicRequest(body: unknown): CanonicalRequest {
  if (!isRecord(body)) throw bad('request body must be a JSON object');
  const req = body as AnthropicRequest;
  if (!Array.isArray(req.messages)) throw bad('`messages` must be an array', 'messages');
  if (req.model !== undefined && typeof req.model !== 'string') throw bad('`model` must be a string', 'model');
  if (req.tools !== undefined && req.tools !== null && !Array.isArray(req.tools)) throw bad('`tools` must be an array of tool definitions', 'tools');

  const messages: ChatMessage[] = [];
  const system = systemText(req.system);
  if (system) messages.push({ role: 'system', content: system });
  req.messages.forEach((m, i) => {
    if (!isRecord(m) || (m.role !== 'user' && m.role !== 'assistant' && m.role !== 'system')) {
      throw bad(`messages[${i}].role must be user, assistant or system`, 'messages');
    }
    if (typeof m.content !== 'string' && !Array.isArray(m.content)) throw bad(`messages[${i}].content must be a string or an array`, 'messages');
    if (m.role === 'assistant') messages.push(assistantMessage(m.content));
    else if (m.role === 'system') messages.push({ role: 'system', content: stripBilling(typeof m.content === 'string' ? m.content : textOf(m.content)) });
    else messages.push(...userMessages(m.content, i));
  });

  const out: Record<string, unknown> = { messages };
  const tools = (req.tools ?? []).filter((t) => isRecord(t) && t.input_schema !== undefined);
  if (tools.length > 0) {
    // Server tools (web search, code execution: a `type` and no `input_schema`) run at Anthropic,
    // not in the harness; a local model cannot call them, so they are not offered.
    out.tools = tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description ?? '', parameters: t.input_schema } }));
    const choice = toolChoice(req.tool_choice);
    if (choice !== undefined) out.tool_choice = choice;
    if (req.tool_choice?.disable_parallel_tool_use) out.parallel_tool_calls = false;
  }
  if (typeof req.max_tokens === 'number') out.max_tokens = req.max_tokens;
  if (typeof req.temperature === 'number') out.temperature = req.temperature;
  if (typeof req.top_p === 'number') out.top_p = req.top_p;
  if (typeof req.top_k === 'number') out.top_k = req.top_k;
  if (Array.isArray(req.stop_sequences) && req.stop_sequences.length > 0) out.stop = req.stop_sequences;

  const state: AnthropicCodecState = { stopSequences: Array.isArray(req.stop_sequences) ? req.stop_sequences : [] };
  return canonicalRequest({
    model: typeof req.model === 'string' ? req.model : '',
    stream: req.stream === true,
    body: out,
    thinking: thinkingSwitch(req.thinking),
    codecState: state,
  });
}

function systemText(system: AnthropicRequest['system']): string {
  if (system === undefined || system === null) return '';
  if (typeof system === 'string') return stripBilling(system);
  if (!Array.isArray(system)) throw bad('`system` must be a string or an array of text blocks', 'system');
  return system
    .map((b) => (isRecord(b) && typeof b.text === 'string' ? stripBilling(b.text) : ''))
    .filter((t) => t.length > 0)
    .join('\n\n');
}

/** Trims ASCII whitespace only: the same on real strings and on byte strings (DecodeContext.byteStrings). */
function stripBilling(text: string): string {
  return text.includes('x-anthropic-billing-header:') ? text.replace(BILLING_LINE, '').replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '') : text;
}

function textOf(blocks: AnthropicBlock[]): string {
  return blocks
    .filter((b): b is AnthropicTextBlock => b.type === 'text' && typeof (b as AnthropicTextBlock).text === 'string')
    .map((b) => b.text)
    .join('\n');
}

/**
 * A user turn: tool results first, each its own `tool` message (chat templates expect them right
 * after the assistant's calls), then the turn's other content as one user message. Images inside a
 * tool result follow in that user message, since chat tool messages carry text only.
 */
function userMessages(content: string | AnthropicBlock[], index: number): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const tools: ChatMessage[] = [];
  const parts: unknown[] = [];
  for (const [b, block] of content.entries()) {
    if (!isRecord(block)) continue;
    if (block.type === 'tool_result') {
      const result = block as unknown as AnthropicToolResultBlock;
      const { text, images } = toolResultContent(result.content, `messages[${index}].content[${b}].content`);
      tools.push({ role: 'tool', tool_call_id: result.tool_use_id, content: result.is_error ? `[Tool Error] ${text}` : text });
      parts.push(...images);
    } else if (block.type === 'text') {
      parts.push({ type: 'text', text: (block as AnthropicTextBlock).text });
    } else if (block.type === 'image') {
      parts.push(imagePart(block));
    }
    // Other block types (documents, search results) have no chat equivalent and are not sent.
  }
  const out = [...tools];
  if (parts.length > 0) {
    const allText = parts.every((p) => isRecord(p) && p.type === 'text');
    out.push({ role: 'user', content: allText && parts.length === 1 ? (parts[0] as { text: string }).text : parts });
  }
  return out;
}

function toolResultContent(content: AnthropicToolResultBlock['content'], field: string): { text: string; images: unknown[] } {
  if (content === undefined || content === null) return { text: '', images: [] };
  if (typeof content === 'string') return { text: content, images: [] };
  if (!Array.isArray(content)) throw bad(`${field} must be a string or an array of content blocks`, 'messages');
  const texts: string[] = [];
  const images: unknown[] = [];
  for (const block of content) {
    if (!isRecord(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string') texts.push(block.text);
    else if (block.type === 'image') images.push(imagePart(block as unknown as Record<string, unknown>));
  }
  return { text: texts.join('\n'), images };
}

function imagePart(block: Record<string, unknown>): unknown {
  const source = isRecord(block.source) ? block.source : {};
  const url = source.type === 'url' ? String(source.url) : `data:${String(source.media_type)};base64,${String(source.data)}`;
  return { type: 'image_url', image_url: { url } };
}

/** An assistant turn: text, reasoning from thinking blocks, and tool calls from tool_use blocks. */
function assistantMessage(content: string | AnthropicBlock[]): ChatMessage {
  if (typeof content === 'string') return { role: 'assistant', content };
  const texts: string[] = [];
  const thinking: string[] = [];
  const calls: ChatToolCall[] = [];
  for (const block of content) {
    if (!isRecord(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string') texts.push(block.text);
    else if (block.type === 'thinking' && typeof block.thinking === 'string') thinking.push(block.thinking);
    else if (block.type === 'tool_use') {
      calls.push({ id: String(block.id), type: 'function', function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } });
    }
    // redacted_thinking is Anthropic-encrypted: no text to give a local model.
  }
  const message: ChatMessage = { role: 'assistant', content: texts.join('') };
  if (thinking.length > 0) message.reasoning_content = thinking.join('\n');
  if (calls.length > 0) message.tool_calls = calls;
  return message;
}

function toolChoice(choice: AnthropicRequest['tool_choice']): unknown {
  if (!isRecord(choice)) return undefined;
  switch (choice.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      return { type: 'function', function: { name: choice.name } };
    default:
      return undefined;
  }
}

function thinkingSwitch(thinking: AnthropicRequest['thinking']): boolean | undefined {
  if (!isRecord(thinking)) return undefined;
  if (thinking.type === 'enabled' || thinking.type === 'adaptive') return true;
  if (thinking.type === 'disabled') return false;
  return undefined;
}

function bad(message: string, param?: string): PolarError {
  return new PolarError('POLAR_BAD_REQUEST', message, 400, param ? { param } : undefined);
}

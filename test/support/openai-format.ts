/**
 * What NeMo-RL reads from an `openai_format` SFT line, written from its source at the pinned commit
 * (NeMo-RL `7ea279a`), as a validator: returns every problem found as `path: what`; an empty list
 * means the line is what the dataset and the SFT processor take as it is.
 *
 * - `OpenAIFormatDataset.format_data` reads the messages under `chat_key` (default "messages",
 *   nemo_rl/data/datasets/response_datasets/oai_format_dataset.py:125, read at :188) and asserts the
 *   last one is the assistant's (:193); it passes `tools` on when the line has the `tool_key`
 *   (default "tools", :128, :197-198).
 * - `sft_processor` hands the messages and `tools` to `get_formatted_message_log`
 *   (nemo_rl/data/processors.py:159-167), which finds the first user message by `role` (:531-535 of
 *   nemo_rl/data/llm_message_utils.py), gives `tools` to the template (:562-563), renders the list of
 *   message dicts, whole, with the tokenizer's chat template (:565-567), and copies each dict into
 *   the training message log (`message.copy()`, :635) before setting its `token_ids` (:638-640);
 *   `content` may be missing or empty only where the template renders something else (an assistant
 *   turn of tool calls only, :670-673).
 * So every key of a message reaches the template and the batch: polar's rule is that a message has
 * only the keys a chat template reads (role, content, tool_calls, tool_call_id, name,
 * reasoning_content), holds its reasoning once, and carries no token ids (`token_ids` would be
 * overwritten at :638; NeMo-RL's `prompt_token_ids` / `generation_token_ids` / `generation_log_probs`
 * are an upstream's request fields, tens of thousands of ids per message).
 */

type Json = Record<string, unknown>;

export const MESSAGE_KEYS: ReadonlySet<string> = new Set(['role', 'content', 'tool_calls', 'tool_call_id', 'name', 'reasoning_content']);
const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

export function openaiFormatProblems(line: unknown, keys: { chat: string; tool: string } = { chat: 'messages', tool: 'tools' }): string[] {
  const problems: string[] = [];
  const p = (path: string, what: string) => problems.push(`${path}: ${what}`);
  if (!isObj(line)) return ['line: not an object'];
  const messages = line[keys.chat];
  // :188 iterates data[chat_key]; :193 indexes its last element.
  if (!Array.isArray(messages) || messages.length === 0) return [...problems, `${keys.chat}: a non-empty list is required (oai_format_dataset.py:188, :193)`];
  const last = messages[messages.length - 1];
  if (!isObj(last) || last.role !== 'assistant') p(`${keys.chat}[-1].role`, "must be 'assistant' (oai_format_dataset.py:193 asserts it)");
  if (keys.tool in line && !Array.isArray(line[keys.tool])) p(keys.tool, 'a list of tools, handed to the chat template (llm_message_utils.py:562-563)');
  if (Array.isArray(line[keys.tool])) {
    (line[keys.tool] as unknown[]).forEach((tool, i) => {
      const fn = isObj(tool) && isObj(tool.function) ? tool.function : tool;
      if (!isObj(fn) || typeof fn.name !== 'string') p(`${keys.tool}[${i}]`, 'a tool with a name');
    });
  }
  messages.forEach((m, i) => {
    const at = `${keys.chat}[${i}]`;
    if (!isObj(m)) return p(at, 'not an object');
    if (typeof m.role !== 'string' || !ROLES.has(m.role))
      p(`${at}.role`, 'system | user | assistant | tool (llm_message_utils.py:533 reads it; templates drop other roles)');
    for (const k of Object.keys(m))
      if (!MESSAGE_KEYS.has(k))
        p(`${at}.${k}`, 'not a chat field: reaches the chat template and the training batch as it is (llm_message_utils.py:565-567, :635)');
    const content = m.content;
    const toolCalls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
    if (content === undefined || content === null || content === '') {
      if (!(m.role === 'assistant' && (toolCalls.length > 0 || typeof m.reasoning_content === 'string')))
        p(`${at}.content`, 'required (only an assistant turn of tool calls may go without, llm_message_utils.py:670-673)');
    } else if (typeof content !== 'string' && !Array.isArray(content)) p(`${at}.content`, 'a string or a list of parts');
    else if (Array.isArray(content))
      content.forEach((part, k) =>
        !isObj(part) || typeof part.type !== 'string' ? p(`${at}.content[${k}]`, 'a part with a type (llm_message_utils.py:526, :680)') : undefined,
      );
    toolCalls.forEach((c, k) => {
      if (!isObj(c) || !isObj(c.function) || typeof c.function.name !== 'string' || (typeof c.function.arguments !== 'string' && !isObj(c.function.arguments)))
        p(`${at}.tool_calls[${k}]`, '{function: {name, arguments}}');
    });
    if (m.role === 'tool' && typeof m.tool_call_id !== 'string') p(`${at}.tool_call_id`, 'a tool result names the call it answers');
  });
  return problems;
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

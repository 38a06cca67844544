import { isRecord, type ChatMessage } from '../core/chat.js';

/**
 * Whether a replayed request is the recorded one (pure). A replay runs the harness again in another
 * workspace, at another time, so some text is bound to differ: the system prompt (dates, paths,
 * environment, and the environment blocks harnesses add to user turns), and what tools print
 * (listings with times and sizes). Everything the harness decides
 * from the conversation must be the same: the number and roles of messages, the user's words (paths
 * and dates normalised), each assistant turn's text, reasoning and tool calls (names and parsed
 * arguments, ids), and which tool call each result answers. The first difference is reported.
 */
export interface Mismatch {
  /** Index of the first message that differs (or where one list ends). */
  message: number;
  what: string;
  expected: string;
  found: string;
}

export function compareConversations(recorded: readonly ChatMessage[], replayed: readonly ChatMessage[]): Mismatch | null {
  const n = Math.max(recorded.length, replayed.length);
  for (let i = 0; i < n; i++) {
    const r = recorded[i];
    const p = replayed[i];
    if (!r || !p) return { message: i, what: 'message count', expected: `${recorded.length} messages`, found: `${replayed.length} messages` };
    if (r.role !== p.role) return { message: i, what: 'role', expected: r.role, found: p.role };
    const m = compareMessage(r, p);
    if (m) return { message: i, ...m };
  }
  return null;
}

function compareMessage(r: ChatMessage, p: ChatMessage): Omit<Mismatch, 'message'> | null {
  if (r.role === 'system' || r.role === 'developer') return null; // environment-bound
  if (r.role === 'tool') {
    return r.tool_call_id === p.tool_call_id ? null : { what: 'tool result for another call', expected: String(r.tool_call_id), found: String(p.tool_call_id) };
  }
  if (r.role === 'user') {
    const a = normalize(textOf(r.content));
    const b = normalize(textOf(p.content));
    return a === b ? null : { what: 'user text', ...snippet(a, b) };
  }
  if (r.role === 'assistant') {
    const a = textOf(r.content);
    const b = textOf(p.content);
    if (a.trim() !== b.trim()) return { what: 'assistant text', ...snippet(a, b) };
    const ra = r.reasoning_content ?? '';
    const pa = p.reasoning_content ?? '';
    if (ra && pa && ra.trim() !== pa.trim()) return { what: 'assistant reasoning', ...snippet(ra, pa) };
    const rc = r.tool_calls ?? [];
    const pc = p.tool_calls ?? [];
    if (rc.length !== pc.length) return { what: 'tool calls', expected: `${rc.length} calls`, found: `${pc.length} calls` };
    for (let k = 0; k < rc.length; k++) {
      const x = rc[k]!;
      const y = pc[k]!;
      if (x.function.name !== y.function.name) return { what: `tool call ${k} name`, expected: x.function.name, found: y.function.name };
      if (!sameJson(x.function.arguments, y.function.arguments))
        return { what: `tool call ${k} arguments`, ...snippet(x.function.arguments, y.function.arguments) };
      if (x.id && y.id && x.id !== y.id) return { what: `tool call ${k} id`, expected: x.id, found: y.id };
    }
  }
  return null;
}

/**
 * Harnesses put environment context into user messages in tagged blocks (Gemini CLI's
 * `<session_context>` with the folder tree, Codex's `<environment_context>`, Claude Code's `<env>` and
 * `<system-reminder>`): they describe the machine and the workspace, not what the user asked.
 */
const CONTEXT_BLOCKS = /<(session_context|environment_context|env|system-reminder|user_instructions)>[\s\S]*?<\/\1>/g;

/** Paths, dates, times and environment blocks differ run to run; the words around them may not. */
export function normalize(text: string): string {
  return text
    .replace(CONTEXT_BLOCKS, '<context>')
    .replace(/(?:\/[\w.@+-]+){2,}\/?/g, '<path>')
    .replace(/\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?Z?)?/g, '<date>')
    .replace(/\b\d{1,2}:\d{2}(?::\d{2})?\b/g, '<time>')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The two texts from the first character where they differ, shortened to read in one line. */
export function snippet(expected: string, found: string): { expected: string; found: string } {
  let i = 0;
  while (i < expected.length && i < found.length && expected[i] === found[i]) i++;
  const from = Math.max(0, i - 20);
  const cut = (s: string) => `${from > 0 ? '…' : ''}${s.slice(from, from + 80)}${s.length > from + 80 ? '…' : ''}`;
  return { expected: cut(expected), found: cut(found) };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join('\n');
}

function sameJson(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return JSON.stringify(sortKeys(JSON.parse(a))) === JSON.stringify(sortKeys(JSON.parse(b)));
  } catch {
    return false;
  }
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (isRecord(v))
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys(v[k])]),
    );
  return v;
}

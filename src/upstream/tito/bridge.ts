import { createHash } from 'node:crypto';
import type { ChatMessage } from '../../core/chat.js';
import type { ChatTemplate, TemplateMessage } from './chat-template.js';

/**
 * Bridging: the prompt of a call that continues an earlier one is that call's prompt ids + the ids
 * it sampled (+ the turn's end token when it was cut short) + the tokens of only the new messages
 * and the generation prompt. Earlier turns are never rendered again, so the context a turn is
 * sampled in is exactly the earlier context plus what the model wrote, and strict prefix merging
 * joins every bridged call. Pure functions; the memory of earlier calls is in chain-memory.ts.
 */

/** What polar keeps of a finished call, to continue it. */
export interface ChainEntry {
  callId: string;
  /** Hash of its messages (see `messageKeys`) and their count. */
  messagesKey: string;
  messageCount: number;
  /** Hash of its tools and template switches: a change in either means a full render. */
  contextKey: string;
  promptIds: readonly number[];
  sampledIds: readonly number[];
  /** Kept for servers that take them back with the ids (NeMo-RL). */
  logprobs?: readonly number[] | null;
  /** The reply the harness received, as a canonical assistant message. */
  reply: ChatMessage;
}

/** Why a call's prompt was rendered in full rather than bridged. */
export type FullRenderReason =
  | 'first-call' // nothing earlier in this agent's chain
  | 'history-rewritten' // no earlier call's messages are a prefix of this one's (compaction, edits)
  | 'reply-edited' // the earlier messages match, but the harness sent back a different reply
  | 'context-changed' // tools or template switches differ from the call it would extend
  | 'foreign-assistant'; // a new assistant message that no recorded call produced

export type ParentSearch = { parent: ChainEntry; replyIndex: number } | { parent: null; reason: FullRenderReason };

/**
 * keys[i] identifies messages[0..i): a chained hash, so each message is hashed once and every
 * prefix has a key.
 */
export function messageKeys(messages: readonly ChatMessage[]): string[] {
  const keys: string[] = [];
  let key = '';
  keys.push(key);
  for (const m of messages) {
    key = createHash('sha256').update(key).update(JSON.stringify(m)).digest('base64');
    keys.push(key);
  }
  return keys;
}

export function contextKey(tools: readonly unknown[] | undefined, kwargs: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify(tools ?? [])).update('\0').update(JSON.stringify(kwargs)).digest('base64');
}

/**
 * The earlier call this request continues: the longest prefix of its messages that is some call's
 * messages, followed by that call's reply as the harness sent it back, followed only by messages
 * that are not assistant turns. `entries` newest first.
 */
export function findParent(messages: readonly ChatMessage[], keys: readonly string[], context: string, entries: readonly ChainEntry[]): ParentSearch {
  if (entries.length === 0) return { parent: null, reason: 'first-call' };
  let reason: FullRenderReason = 'history-rewritten';
  const lastAssistant = lastIndexOfRole(messages, 'assistant');
  for (let i = messages.length - 1; i >= 1; i--) {
    const echo = messages[i]!;
    if (echo.role !== 'assistant') continue;
    for (const entry of entries) {
      if (entry.messageCount !== i || entry.messagesKey !== keys[i]) continue;
      if (!replyMatches(echo, entry.reply)) {
        reason = 'reply-edited';
        continue;
      }
      if (entry.contextKey !== context) {
        reason = 'context-changed';
        continue;
      }
      if (lastAssistant > i) return { parent: null, reason: 'foreign-assistant' };
      return { parent: entry, replyIndex: i };
    }
  }
  return { parent: null, reason };
}

/**
 * Whether the assistant message a harness sent back is the reply polar gave it: the same text and
 * tool calls (names and arguments, compared as JSON), and the same reasoning if it sent any back
 * (harnesses may drop reasoning; the sampled ids keep it either way). Whitespace at the ends of
 * text is not compared: harnesses trim it.
 */
export function replyMatches(echo: ChatMessage, reply: ChatMessage): boolean {
  if (echo.role !== 'assistant') return false;
  if (textOf(echo.content).trim() !== textOf(reply.content).trim()) return false;
  const echoed = typeof echo.reasoning_content === 'string' ? echo.reasoning_content.trim() : '';
  if (echoed && echoed !== (reply.reasoning_content ?? '').trim()) return false;
  const a = echo.tool_calls ?? [];
  const b = reply.tool_calls ?? [];
  if (a.length !== b.length) return false;
  return a.every((call, i) => call.function.name === b[i]!.function.name && sameJson(call.function.arguments, b[i]!.function.arguments));
}

/**
 * The tokens that follow the parent's turn: its end token (when the model did not sample one) and
 * the rendering of the new messages plus the generation prompt — cut from a render of a small
 * window (a stand-in user turn, the echoed reply, the new messages) after the reply's end token,
 * so the work is proportional to the new messages, not the history.
 */
export function bridgeTail(
  template: ChatTemplate,
  parent: ChainEntry,
  echo: ChatMessage,
  newMessages: readonly ChatMessage[],
  tools: readonly unknown[] | undefined,
  kwargs: Record<string, unknown>,
): { ids: number[]; text: string } {
  // The tool list is left out of the window: templates put it in a header (the system turn, or the
  // first user turn) that is cut away, and rendering a harness's 30 KB of tool schemas twice per
  // call would cost more than the new messages. `checkBridges` compares with a render that has it.
  void tools;
  const window: TemplateMessage[] = [{ role: 'user', content: '.' }, echo as TemplateMessage];
  const text = tailAfterTurn(template, window, newMessages, undefined, kwargs);
  const ids: number[] = [];
  const last = parent.sampledIds[parent.sampledIds.length - 1];
  if (last === undefined || !template.stopIds.includes(last)) ids.push(template.turnEnd.id);
  for (const id of template.encode(text)) ids.push(id);
  return { ids, text };
}

/**
 * The template's own text for `newMessages` and the generation prompt after `history` (which
 * ends with an assistant turn): render both, count turn-end tokens in the history, and cut the
 * full render after that many. Templates that drop earlier reasoning change text inside the
 * history but never the number of turns, so the cut lands on the same boundary.
 */
export function tailAfterTurn(
  template: ChatTemplate,
  history: readonly TemplateMessage[],
  newMessages: readonly ChatMessage[],
  tools: readonly unknown[] | undefined,
  kwargs: Record<string, unknown>,
): string {
  const end = template.turnEnd.text;
  const head = template.render(history, { tools, addGenerationPrompt: false, kwargs });
  const turns = count(head, end);
  const full = template.render([...history, ...(newMessages as TemplateMessage[])], { tools, addGenerationPrompt: true, kwargs });
  let at = -end.length;
  for (let k = 0; k < turns; k++) {
    at = full.indexOf(end, at + end.length);
    if (at < 0) throw new Error('the chat template rendered fewer turns with the new messages than without');
  }
  return full.slice(at + end.length);
}

function count(text: string, needle: string): number {
  let n = 0;
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) n++;
  return n;
}

function lastIndexOfRole(messages: readonly ChatMessage[], role: string): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === role) return i;
  return -1;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p) => (typeof (p as { text?: unknown })?.text === 'string' ? (p as { text: string }).text : '')).join('');
  }
  return '';
}

function sameJson(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return stableJson(JSON.parse(a)) === stableJson(JSON.parse(b));
  } catch {
    return false;
  }
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

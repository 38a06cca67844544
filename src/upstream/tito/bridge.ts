import { createHash, randomBytes } from 'node:crypto';
import { contentText, type ChatMessage } from '../../core/chat.js';
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
  /** Kept as Uint32Array by ChainMemory (half the memory of a number array). */
  promptIds: ArrayLike<number> & Iterable<number>;
  sampledIds: ArrayLike<number> & Iterable<number>;
  /** Kept for servers that take them back with the ids (NeMo-RL). */
  logprobs?: (ArrayLike<number> & Iterable<number>) | null;
  /** The reply the harness received, as a canonical assistant message. */
  reply: ChatMessage;
}

/** Why a call's prompt was rendered in full rather than bridged. */
export type FullRenderReason =
  | 'first-call' // nothing earlier in this agent's chain
  | 'chain-evicted' // its chain was dropped from memory (budget), or the proxy restarted
  | 'history-rewritten' // no earlier call's messages are a prefix of this one's (compaction, edits)
  | 'reply-edited' // the earlier messages match, but the harness sent back a different reply
  | 'context-changed' // tools or template switches differ from the call it would extend
  | 'foreign-assistant' // a new assistant message that no recorded call produced
  | 'template-unbridgeable'; // the template does not show where the earlier turn ends

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
  return createHash('sha256')
    .update(JSON.stringify(tools ?? []))
    .update('\0')
    .update(JSON.stringify(kwargs))
    .digest('base64');
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
  if (contentText(echo.content, '').trim() !== contentText(reply.content, '').trim()) return false;
  const echoed = typeof echo.reasoning_content === 'string' ? echo.reasoning_content.trim() : '';
  if (echoed && echoed !== (reply.reasoning_content ?? '').trim()) return false;
  const a = echo.tool_calls ?? [];
  const b = reply.tool_calls ?? [];
  if (a.length !== b.length) return false;
  return a.every((call, i) => call.function.name === b[i]!.function.name && sameJson(call.function.arguments, b[i]!.function.arguments));
}

/**
 * The tokens that follow the parent's turn: the template's end-of-turn token when the model did
 * not sample that very token (a length cut, a stop string, another stop id), then the rendering of
 * the new messages plus the generation prompt — cut from a render of a small window (a stand-in
 * user turn, the parent's turn, the new messages), so the work is proportional to the new
 * messages, not the history.
 */
export function bridgeTail(
  template: ChatTemplate,
  parent: ChainEntry,
  echo: ChatMessage,
  newMessages: readonly ChatMessage[],
  tools: readonly unknown[] | undefined,
  kwargs: Record<string, unknown>,
): { ids: number[]; text: string } {
  const window: TemplateMessage[] = [{ role: 'user', content: '.' }, echo as TemplateMessage];
  const text = tailAfterTurn(template, window, newMessages, tools, kwargs);
  const ids: number[] = [];
  if (parent.sampledIds[parent.sampledIds.length - 1] !== template.turnEnd.id) ids.push(template.turnEnd.id);
  for (const id of template.encode(text)) ids.push(id);
  return { ids, text };
}

/** A string no conversation contains (random per process), standing in for the parent turn's text. */
const MARKER = `\u2063polar-bridge-${randomBytes(8).toString('hex')}\u2063`;

/**
 * The template's own text for `newMessages` and the generation prompt after `history`, whose last
 * message is the assistant turn they follow. That turn is rendered with a marker for its text, no
 * reasoning and empty tool arguments (its real tokens are the sampled ids, not this render), and the
 * tail starts after the first end-of-turn token past the marker — so nothing the conversation
 * contains (a literal `<|im_end|>` in reasoning or arguments, reasoning a template drops) can move
 * the cut. Throws when the template does not show the turn's text (the caller renders in full).
 */
export function tailAfterTurn(
  template: ChatTemplate,
  history: readonly TemplateMessage[],
  newMessages: readonly ChatMessage[],
  tools: readonly unknown[] | undefined,
  kwargs: Record<string, unknown>,
): string {
  const end = template.turnEnd.text;
  const turn = history[history.length - 1]!;
  const calls = Array.isArray(turn.tool_calls) ? (turn.tool_calls as ChatMessage['tool_calls'])! : [];
  const stand: TemplateMessage = { role: 'assistant', content: MARKER };
  // A tool name is kept (templates may pair results with it) unless it contains the end text itself.
  if (calls.length > 0)
    stand.tool_calls = calls.map((c, i) => ({ ...c, function: { name: c.function.name.includes(end) ? `tool_${i}` : c.function.name, arguments: '{}' } }));
  const full = template.render([...history.slice(0, -1), stand, ...(newMessages as TemplateMessage[])], { tools, addGenerationPrompt: true, kwargs });
  const at = full.indexOf(MARKER);
  const once = at >= 0 && full.indexOf(MARKER, at + MARKER.length) < 0;
  const cut = once ? full.indexOf(end, at + MARKER.length) : -1;
  if (cut < 0) throw new BridgeUnavailable("the chat template does not render the assistant turn's text followed by its end token");
  return full.slice(cut + end.length);
}

/** The template cannot show where a turn ends, so this call is rendered in full. */
export class BridgeUnavailable extends Error {
  override name = 'BridgeUnavailable';
}

function lastIndexOfRole(messages: readonly ChatMessage[], role: string): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === role) return i;
  return -1;
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

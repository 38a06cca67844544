import type { SampleRow } from '../store/rollouts.js';
import type { CallTokenRow } from '../store/requests.js';
import type { Store } from '../store/store.js';
import { compareFirstPrompts, type FirstPrompt, type FirstPromptCheck, sampleFirstPrompt } from './first-prompts.js';

/**
 * A group's first-prompt check from the store: each sample's first prompt as recorded (the main
 * agent's first call with server token ids, first-prompts.ts), compared across the group. A sample
 * that never reached a model call (an error before the harness ran, an unfinished one) is reported
 * as not compared, with why. A split group's message names what differs, from the two first calls'
 * text as sent upstream (read only then).
 */
export function groupFirstPrompts(store: Store, members: readonly SampleRow[], rowsOf?: (sessionId: string) => readonly CallTokenRow[]): FirstPromptCheck {
  return compareFirstPrompts(
    members.map((m) => (m.sessionId ? sessionFirstPrompt(store, m.sessionId, rowsOf?.(m.sessionId)) : { unchecked: `no session (${m.status})` })),
  );
}

/** One session's first prompt, its text readable on demand; `rows`: its calls, when already read. */
export function sessionFirstPrompt(store: Store, sessionId: string, rows: readonly CallTokenRow[] = store.requests.tokens(sessionId)): FirstPrompt {
  const first = sampleFirstPrompt(rows);
  return 'unchecked' in first ? first : { ...first, text: () => firstPromptText(store, rows) };
}

/**
 * The first prompt's call as text, to diff two of them: every string of its messages and tools (and
 * a system field) as sent upstream, newlines kept, in order. Not the template's rendering (that
 * needs the tokenizer's template), but every word the model is shown is in it, so a date, a path or
 * an OS version that differs reads as it was sent. Null when the body was not kept.
 */
export function firstPromptText(store: Store, rows: readonly CallTokenRow[]): string | null {
  const first = sampleFirstPrompt(rows);
  if ('unchecked' in first || !first.requestId) return null;
  const body = store.requests.get(first.requestId)?.upstreamRequest;
  if (!body) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return body;
  }
  const { messages, tools, system, instructions, input, contents, systemInstruction } = parsed as Record<string, unknown>;
  const parts = [system, systemInstruction, instructions, messages, input, contents, tools].filter((p) => p !== undefined);
  const out: string[] = [];
  flatten(parts.length > 0 ? parts : parsed, out);
  return out.join('\n');
}

function flatten(value: unknown, out: string[]): void {
  if (typeof value === 'string') out.push(value);
  else if (typeof value === 'number' || typeof value === 'boolean') out.push(String(value));
  else if (Array.isArray(value)) for (const v of value) flatten(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) flatten(v, out);
}

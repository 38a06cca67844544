import chalk from 'chalk';
import type { RecordedCall } from '../session/call-feed.js';
import { formatDuration } from './output.js';

/** How much of the reply (or error) a line shows: enough to follow the agent, short of wrapping. */
const WHAT_WIDTH = 80;

/**
 * One finished call as a line for `polar run`'s stdout, in place of the harness's own output (often
 * a JSON event stream, kept in the log file):
 * `call 3  anthropic-messages  1,234 → 56 tokens  tool_calls  0.8s  Bash: ls -la`.
 */
export function callLine(call: RecordedCall): string {
  const agent = call.agentId !== 'main' ? `  ${chalk.cyan(`agent ${call.agentId}`)}` : '';
  const tokens =
    call.promptTokenCount !== null
      ? `${call.promptTokenCount.toLocaleString('en')} → ${(call.sampledTokenCount ?? 0).toLocaleString('en')} tokens`
      : 'no token ids';
  const outcome =
    call.status === 'ok'
      ? chalk.green(call.finishReason ?? 'ok')
      : (call.status === 'error' ? chalk.red : chalk.yellow)(call.httpStatus ? `${call.status} ${call.httpStatus}` : call.status);
  const took = formatDuration(call.endedAt !== null ? call.endedAt - call.startedAt : null);
  const what = call.status === 'ok' ? replySummary(call.assistantMessage) : oneLine(call.error ?? '');
  return `${chalk.bold(`call ${call.seq}`)}${agent}  ${call.provider}  ${tokens}  ${outcome}  ${chalk.dim(took)}${what ? `  ${what}` : ''}`;
}

/**
 * The assistant's reply in a few words: its tool calls as `Name: first argument` (the command a
 * shell tool runs, the file a write names), else its text, else that it only reasoned.
 */
export function replySummary(message: unknown): string {
  if (!message || typeof message !== 'object') return '';
  const m = message as { content?: unknown; tool_calls?: unknown; reasoning_content?: unknown };
  if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
    return clip(m.tool_calls.map((c) => toolCallSummary(c)).join('; '));
  }
  const text = oneLine(textOf(m.content));
  if (text) return `"${clip(text, WHAT_WIDTH - 2)}"`;
  return typeof m.reasoning_content === 'string' && m.reasoning_content.trim() ? chalk.dim('(reasoning only)') : '';
}

function toolCallSummary(call: unknown): string {
  const fn = (call as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
  const name = typeof fn?.name === 'string' ? fn.name : '?';
  const args = typeof fn?.arguments === 'string' ? fn.arguments : '';
  const first = firstStringArgument(args);
  return first !== null ? `${name}: ${oneLine(first)}` : `${name} ${oneLine(args)}`.trim();
}

/** The first string value of a JSON object of arguments, or null when there is none. */
function firstStringArgument(args: string): string | null {
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      const value = Object.values(parsed).find((v): v is string => typeof v === 'string' && v.trim() !== '');
      return value ?? null;
    }
  } catch {
    // arguments that are not JSON (a truncated stream) are shown as they are
  }
  return null;
}

/** Text content, whether a string or an array of `{ type: 'text', text }` parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).join(' ');
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function clip(text: string, width = WHAT_WIDTH): string {
  return text.length > width ? `${text.slice(0, width - 1)}…` : text;
}

import type { ChatBody } from '../../src/mock-server/server.js';
import type { ScriptedReply } from '../../src/mock-server/sampler.js';
import { findShellTool, type ScriptTool } from '../../src/mock-server/script.js';
import { type CallMeta, contentText } from '../../src/mock-server/tasks.js';

/**
 * A real-length session for the mock model: `steps` shell commands, each printing `lines` lines of
 * a log, then a final answer. The conversation grows by about `lines` × 7 tokens a step (× 12 with
 * `words`), so a
 * harness's context passes its compaction point, where it rewrites its history (a summary request,
 * then a conversation that starts again from the summary).
 *
 * Which step comes next is counted per session (the `x-polar-session` the proxy sends), not read
 * from the conversation: after a harness compacted, the history that said how far it got is gone.
 * A request that asks for a summary (each harness's compaction prompt) or offers no shell tool is
 * answered with text and counts no step, so a compacting harness still ends.
 */
export const LONG_TASK_PROMPT = 'Print each of the twelve step logs with your shell tool, one at a time, then say finished.';

/** The words each harness's compaction or summarising request uses (its last user text). */
const SUMMARY_REQUEST = /summar|compact|state_snapshot|checkpoint|continuing (our|the) conversation|handoff/i;

export function longSessionScript(opts: {
  steps: number;
  lines: number;
  words?: boolean;
}): (body: ChatBody, callIndex: number, meta: CallMeta) => ScriptedReply {
  const done = new Map<string, number>();
  return (body, _callIndex, meta) => {
    const shell = findShellTool((body.tools ?? []) as ScriptTool[]);
    const lastUser = [...body.messages].reverse().find((m) => m.role === 'user');
    if (!shell || SUMMARY_REQUEST.test(contentText(lastUser?.content)))
      return { content: 'Summary: printing the step logs one by one with the shell; continue with the next step.' };
    if (!body.messages.some((m) => m.role === 'user' && contentText(m.content).includes(LONG_TASK_PROMPT.slice(0, 40)))) {
      // A side request (a title, a classifier) that offers tools but is not the task.
      return { content: 'ok' };
    }
    const key = meta.session ?? 'default';
    const step = done.get(key) ?? 0;
    if (step >= opts.steps) return { content: 'finished' };
    done.set(key, step + 1);
    // Numbers cost Qwen3 a token a digit; `words` lines cost about what a harness estimates (4 characters a token).
    const command = opts.words
      ? `yes 'step ${step + 1}: the quick brown fox jumps over the lazy dog' | head -n ${opts.lines}`
      : `seq -f 'step ${step + 1} log row %g' 1 ${opts.lines}`;
    return { reasoning: `Step ${step + 1}.`, toolCalls: [{ name: shell.name, arguments: shell.args(command) }] };
  };
}

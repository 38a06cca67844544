import { createHash } from 'node:crypto';
import type { ScriptedReply } from './sampler.js';
import { demoScript, findShellTool, stepsDone, type ScriptMessage, type ScriptTool } from './script.js';

/**
 * Scripted solutions for rollout tasks, so runs against the mock model are not all alike. A task
 * (from a rollout task file) may carry `metadata.mock: {"correct": [commands], "wrong": [commands]}`;
 * the mock recognises the task by its prompt in the conversation and, for each new session of that
 * task, picks one of the two: sessions of a task alternate correct / wrong, starting with a choice
 * seeded by `--seed` and the task id. So a group of N samples gets ⌈N/2⌉ or ⌊N/2⌋ correct runs —
 * mixed rewards, non-zero advantages — and the same seed and arrival order give the same choices. A
 * session keeps its choice for all its calls (sessions are told apart by the `x-polar-session`
 * header the proxy sends upstream). The agent then runs the chosen commands one by one with its own
 * shell tool and says it is done. Token ids stay real: the replies are sampled like every other.
 */
export interface MockTask {
  id: string;
  prompt: string;
  correct: string[];
  wrong: string[];
}

export interface CallMeta {
  /** The session the proxy named (x-polar-session), when there is one. */
  session: string | null;
}

export type MockScript = (
  body: { messages: readonly ScriptMessage[]; tools?: readonly unknown[]; chat_template_kwargs?: { enable_thinking?: boolean } },
  callIndex: number,
  meta: CallMeta,
) => ScriptedReply;

/** Tasks with scripted solutions, from task-file objects (those without `metadata.mock` are skipped). */
export function mockTasksFrom(tasks: readonly { id: string; prompt: string; metadata?: Record<string, unknown> }[]): MockTask[] {
  const out: MockTask[] = [];
  for (const t of tasks) {
    const mock = t.metadata?.mock as { correct?: unknown; wrong?: unknown } | undefined;
    const list = (v: unknown) => (Array.isArray(v) && v.every((c) => typeof c === 'string') ? (v as string[]) : null);
    const correct = list(mock?.correct);
    const wrong = list(mock?.wrong);
    if (correct && wrong) out.push({ id: t.id, prompt: t.prompt, correct, wrong });
  }
  return out;
}

/** A script that carries out the tasks it knows, and the demo task otherwise. */
export function taskScript(tasks: readonly MockTask[], seed = 0): MockScript {
  const chosen = new Map<string, 'correct' | 'wrong'>();
  const seen = new Map<string, number>();
  return (body, _callIndex, meta) => {
    const task = findTask(tasks, body.messages);
    if (!task) return demoScript(body);
    const key = `${task.id}\u0000${meta.session ?? firstUserText(body.messages)}`;
    let choice = chosen.get(key);
    if (!choice) {
      const n = seen.get(task.id) ?? 0;
      seen.set(task.id, n + 1);
      choice = (n + seedBit(seed, task.id)) % 2 === 0 ? 'correct' : 'wrong';
      chosen.set(key, choice);
    }
    return follow(task[choice], body);
  };
}

function follow(commands: readonly string[], body: Parameters<MockScript>[0]): ScriptedReply {
  const thinking = body.chat_template_kwargs?.enable_thinking !== false;
  const shell = findShellTool((body.tools ?? []) as ScriptTool[]);
  const step = stepsDone(body.messages);
  const think = (text: string) => (thinking ? { reasoning: text } : {});
  if (!shell) return { ...think('No shell tool here.'), content: 'I need a shell tool to work on this task.' };
  const command = commands[step];
  if (command !== undefined) {
    return {
      ...think(step === 0 ? 'I will work through the task with the shell.' : `Step ${step + 1}.`),
      toolCalls: [{ name: shell.name, arguments: shell.args(command) }],
    };
  }
  return { ...think('The steps are done.'), content: 'Done: I made the change the task asks for.' };
}

function findTask(tasks: readonly MockTask[], messages: readonly ScriptMessage[]): MockTask | undefined {
  const text = messages
    .filter((m) => m.role === 'user')
    .map((m) => contentText(m.content))
    .join('\n');
  const flat = squash(text);
  return tasks.find((t) => flat.includes(squash(t.prompt)));
}

function firstUserText(messages: readonly ScriptMessage[]): string {
  return contentText(messages.find((m) => m.role === 'user')?.content);
}

/** The text of a chat message's content (a string, or its text parts joined by newlines). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => (typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : ''))
    .join('\n');
}

function squash(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function seedBit(seed: number, taskId: string): number {
  return createHash('sha256').update(`${seed}:${taskId}`).digest()[0]! & 1;
}

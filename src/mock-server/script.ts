import type { ScriptedReply } from './sampler.js';

/**
 * The mock model's script: a short, tool-using task that any coding harness can carry out with its
 * own shell tool — inspect the workspace, write a file, answer. It reads the conversation to know
 * which step it is on, and the offered tools to know how to call the shell (Claude Code `Bash`
 * {command}, Codex `exec_command` {cmd}, Gemini CLI and Qwen Code `run_shell_command` {command},
 * Pi and opencode `bash` {command, description}, Responses `local_shell` {command: [...]}).
 * It is scripted, not a model: the same conversation always gets the same reply.
 */
export const DEMO_FILE = 'polar-demo.txt';
export const DEMO_CONTENT = 'captured by polar';

export interface ScriptMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown[];
  [k: string]: unknown;
}

export interface ScriptTool {
  type?: string;
  function?: { name?: string; parameters?: unknown };
}

interface ShellTool {
  name: string;
  args(command: string): Record<string, unknown>;
}

const SHELL_NAMES = ['bash', 'exec_command', 'run_shell_command', 'shell', 'local_shell', 'execute_command', 'run_command', 'terminal'];
const COMMAND_KEYS = ['command', 'cmd', 'commands', 'script'];

export function findShellTool(tools: readonly ScriptTool[]): ShellTool | null {
  const named = (tools ?? []).map((t) => t.function).filter((f): f is { name: string; parameters?: unknown } => typeof f?.name === 'string');
  const fn = named.find((f) => SHELL_NAMES.includes(f.name.toLowerCase())) ?? named.find((f) => /shell|bash|exec/i.test(f.name));
  if (!fn) return null;
  const schema = (fn.parameters ?? {}) as { properties?: Record<string, { type?: string | string[] }>; required?: string[] };
  const props = schema.properties ?? {};
  const key = COMMAND_KEYS.find((k) => k in props) ?? Object.keys(props).find((k) => /command|cmd/i.test(k)) ?? 'command';
  const isArray = props[key]?.type === 'array' || (Array.isArray(props[key]?.type) && (props[key]!.type as string[]).includes('array'));
  return {
    name: fn.name,
    args(command) {
      const args: Record<string, unknown> = { [key]: isArray ? ['bash', '-lc', command] : command };
      // Fill any other required string field (opencode's `description`, for one).
      for (const req of schema.required ?? []) {
        if (!(req in args) && (props[req]?.type === 'string' || props[req]?.type === undefined)) args[req] = 'polar demo step';
      }
      return args;
    },
  };
}

/**
 * Tool results since the task was given: how far through it the agent is. A user message right
 * after tool results belongs to that turn (Claude Code sends `<system-reminder>` text beside its
 * tool results), so only a user message that follows something else starts a new task.
 */
export function stepsDone(messages: readonly ScriptMessage[]): number {
  let done = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'tool') done++;
    else if (m.role === 'user' && messages[i - 1]?.role !== 'tool') break;
  }
  return done;
}

export function demoScript(body: {
  messages: readonly ScriptMessage[];
  tools?: readonly unknown[];
  chat_template_kwargs?: { enable_thinking?: boolean };
}): ScriptedReply {
  const thinking = body.chat_template_kwargs?.enable_thinking !== false;
  const shell = findShellTool((body.tools ?? []) as ScriptTool[]);
  const step = stepsDone(body.messages);
  const think = (text: string) => (thinking ? { reasoning: text } : {});
  if (!shell)
    return { ...think('No shell tool here; answer directly.'), content: 'polar mock model: no shell tool was offered, so I can only answer in text.' };
  if (step === 0) {
    return {
      ...think('First, look at what is in the workspace.'),
      content: 'Let me look around.',
      toolCalls: [{ name: shell.name, arguments: shell.args('ls -la') }],
    };
  }
  if (step === 1) {
    return {
      ...think(`Now write ${DEMO_FILE}.`),
      toolCalls: [{ name: shell.name, arguments: shell.args(`printf '%s\\n' '${DEMO_CONTENT}' > ${DEMO_FILE}`) }],
    };
  }
  return { ...think('Both steps are done; report back.'), content: `Done: I listed the workspace and wrote ${DEMO_FILE}.` };
}

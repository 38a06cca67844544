import { isRecord } from '../../core/chat.js';
import type { ToolKind, ToolTarget } from './types.js';

/** Chat function name of a function inside a namespace (Codex groups its sub-agent tools so). */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}__${name}`;
}

/**
 * Responses tools as chat functions. Function tools map directly. The tool types that run in the
 * harness but are not functions become functions the model can call: `custom` (free-form input,
 * e.g. Codex's apply_patch) takes one string `input`; `local_shell` and `shell` take their action's
 * fields; the functions of a `namespace` tool become `namespace__name` functions, and their calls
 * go back as function calls with `namespace` set. Hosted tools (web_search, file_search,
 * code_interpreter, mcp, image_generation) run at OpenAI and are not offered to a local model.
 */
export function chatTools(tools: unknown[]): { tools: unknown[]; targets: Record<string, ToolTarget> } {
  const out: unknown[] = [];
  const targets: Record<string, ToolTarget> = {};
  const add = (tool: Record<string, unknown>, namespace?: string) => {
    const fn = toFunction(tool);
    if (!fn) return;
    const name = namespace ? namespacedName(namespace, fn.name) : fn.name;
    out.push({ type: 'function', function: { name, description: fn.description, parameters: fn.parameters } });
    targets[name] = namespace ? { kind: fn.kind, name: fn.name, namespace } : { kind: fn.kind, name: fn.name };
  };
  for (const tool of tools) {
    if (!isRecord(tool)) continue;
    if (tool.type === 'namespace' && typeof tool.name === 'string' && Array.isArray(tool.tools)) {
      for (const inner of tool.tools) if (isRecord(inner)) add(inner, tool.name);
    } else {
      add(tool);
    }
  }
  return { tools: out, targets };
}

function toFunction(tool: Record<string, unknown>): { name: string; description: string; parameters: unknown; kind: ToolKind } | null {
  const description = typeof tool.description === 'string' ? tool.description : '';
  switch (tool.type) {
    case 'function':
      return typeof tool.name === 'string'
        ? { name: tool.name, description, parameters: tool.parameters ?? { type: 'object', properties: {} }, kind: 'function' }
        : null;
    case 'custom': {
      if (typeof tool.name !== 'string') return null;
      const format =
        isRecord(tool.format) && tool.format.type === 'grammar'
          ? ` Input grammar (${String(tool.format.syntax ?? '')}):\n${String(tool.format.definition ?? '')}`
          : '';
      return {
        name: tool.name,
        description,
        parameters: { type: 'object', properties: { input: { type: 'string', description: `The raw input.${format}` } }, required: ['input'] },
        kind: 'custom',
      };
    }
    case 'local_shell':
      return {
        name: 'local_shell',
        description: 'Run a command on the local machine.',
        parameters: {
          type: 'object',
          properties: {
            command: { type: 'array', items: { type: 'string' }, description: 'The command and its arguments.' },
            workdir: { type: 'string' },
            timeout_ms: { type: 'integer' },
          },
          required: ['command'],
        },
        kind: 'local_shell',
      };
    case 'shell':
      return {
        name: 'shell',
        description: 'Run shell commands.',
        parameters: {
          type: 'object',
          properties: { commands: { type: 'array', items: { type: 'string' } }, timeout_ms: { type: 'integer' }, max_output_length: { type: 'integer' } },
          required: ['commands'],
        },
        kind: 'shell',
      };
    default:
      return null;
  }
}

/** The arguments text of a tool-call item coming back from the harness. */
export function callArguments(item: Record<string, unknown>): string {
  switch (item.type) {
    case 'custom_tool_call':
      return JSON.stringify({ input: typeof item.input === 'string' ? item.input : '' });
    case 'local_shell_call': {
      const action = isRecord(item.action) ? item.action : {};
      const args: Record<string, unknown> = { command: action.command ?? [] };
      if (action.working_directory != null) args.workdir = action.working_directory;
      if (action.timeout_ms != null) args.timeout_ms = action.timeout_ms;
      return JSON.stringify(args);
    }
    case 'shell_call': {
      const action = isRecord(item.action) ? item.action : {};
      return JSON.stringify(action);
    }
    default:
      return typeof item.arguments === 'string' ? item.arguments : JSON.stringify(item.arguments ?? {});
  }
}

/** The name a tool-call item calls, for item types that carry none. */
export function callName(item: Record<string, unknown>): string {
  if (item.type === 'local_shell_call') return 'local_shell';
  if (item.type === 'shell_call') return 'shell';
  const name = String(item.name ?? '');
  return typeof item.namespace === 'string' && item.namespace ? namespacedName(item.namespace, name) : name;
}

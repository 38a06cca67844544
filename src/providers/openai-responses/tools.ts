import { isRecord } from '../../core/chat.js';
import type { ToolKind } from './types.js';

/**
 * Responses tools as chat functions. Function tools map directly. The tool types that run in the
 * harness but are not functions become functions the model can call: `custom` (free-form input,
 * e.g. Codex's apply_patch) takes one string `input`; `local_shell` and `shell` take their action's
 * fields. Hosted tools (web_search, file_search, code_interpreter, mcp, image_generation) run at
 * OpenAI and are not offered to a local model.
 */
export function chatTools(tools: unknown[]): { tools: unknown[]; kinds: Record<string, ToolKind> } {
  const out: unknown[] = [];
  const kinds: Record<string, ToolKind> = {};
  for (const tool of tools) {
    if (!isRecord(tool)) continue;
    const fn = toFunction(tool);
    if (!fn) continue;
    out.push({ type: 'function', function: { name: fn.name, description: fn.description, parameters: fn.parameters } });
    kinds[fn.name] = fn.kind;
  }
  return { tools: out, kinds };
}

function toFunction(tool: Record<string, unknown>): { name: string; description: string; parameters: unknown; kind: ToolKind } | null {
  const description = typeof tool.description === 'string' ? tool.description : '';
  switch (tool.type) {
    case 'function':
      return typeof tool.name === 'string' ? { name: tool.name, description, parameters: tool.parameters ?? { type: 'object', properties: {} }, kind: 'function' } : null;
    case 'custom': {
      if (typeof tool.name !== 'string') return null;
      const format = isRecord(tool.format) && tool.format.type === 'grammar' ? ` Input grammar (${String(tool.format.syntax ?? '')}):\n${String(tool.format.definition ?? '')}` : '';
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
  return String(item.name ?? '');
}

/**
 * The OpenAI Responses wire fields polar reads or writes (platform.openai.com, "Responses" and
 * "Streaming responses"). Everything else passes unread.
 */
export type ResponsesItem = { type?: string; role?: string; [k: string]: unknown };

export interface ResponsesRequest {
  model?: string;
  instructions?: string | null;
  input?: string | ResponsesItem[];
  tools?: { type: string; name?: string; description?: string; parameters?: unknown; format?: unknown; [k: string]: unknown }[];
  tool_choice?: unknown;
  max_output_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  reasoning?: { effort?: string | null; summary?: string | null } | null;
  parallel_tool_calls?: boolean;
  previous_response_id?: string | null;
  stream?: boolean;
  text?: { format?: { type: string; name?: string; schema?: unknown; strict?: boolean } } | null;
  [extra: string]: unknown;
}

/** How a canonical function maps back to a Responses tool: the kind of item its calls become. */
export type ToolKind = 'function' | 'custom' | 'local_shell' | 'shell';

/** The Responses tool behind a chat function name. */
export interface ToolTarget {
  kind: ToolKind;
  /** The tool's own name (inside its namespace, for namespaced functions). */
  name: string;
  namespace?: string;
}

export interface ResponsesCodecState {
  tools: Record<string, ToolTarget>;
  /** Echoed in the response object, as the API does. */
  echo: {
    instructions: string | null;
    tools: unknown[];
    tool_choice: unknown;
    parallel_tool_calls: boolean;
    max_output_tokens: number | null;
    temperature: number | null;
    top_p: number | null;
    previous_response_id: string | null;
    reasoning: unknown;
    store: boolean;
  };
}

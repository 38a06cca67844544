/**
 * The Anthropic Messages wire fields polar reads or writes (docs.anthropic.com, "Messages" and
 * "Streaming Messages"). Everything else in a request passes unread.
 */
export interface AnthropicTextBlock {
  type: 'text';
  text: string;
  [extra: string]: unknown;
}

export interface AnthropicImageBlock {
  type: 'image';
  source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
}

export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}

export interface AnthropicToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | (AnthropicTextBlock | AnthropicImageBlock | { type: string; [k: string]: unknown })[];
  is_error?: boolean;
}

export interface AnthropicThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature?: string;
}

export type AnthropicBlock =
  | AnthropicTextBlock
  | AnthropicImageBlock
  | AnthropicToolUseBlock
  | AnthropicToolResultBlock
  | AnthropicThinkingBlock
  | { type: 'redacted_thinking'; data: string }
  | { type: string; [k: string]: unknown };

export interface AnthropicMessage {
  role: 'user' | 'assistant' | 'system';
  content: string | AnthropicBlock[];
}

export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema?: unknown;
  type?: string;
}

export interface AnthropicRequest {
  model?: string;
  system?: string | AnthropicTextBlock[];
  messages: AnthropicMessage[];
  tools?: AnthropicTool[];
  tool_choice?: { type: 'auto' | 'any' | 'none' | 'tool'; name?: string; disable_parallel_tool_use?: boolean };
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_sequences?: string[];
  thinking?: { type: 'enabled' | 'adaptive' | 'disabled'; budget_tokens?: number };
  stream?: boolean;
  [extra: string]: unknown;
}

/** What the encoder needs from the request: the stop sequences, to report `stop_sequence`. */
export interface AnthropicCodecState {
  stopSequences: string[];
}

import type { PolarError } from '../../core/errors.js';
import type { ErrorReply } from '../types.js';

/** OpenAI's error object: `{error: {message, type, param, code}}`. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export function openaiErrorBody(err: PolarError): OpenAIErrorBody {
  const param = err.param ?? null;
  // Harnesses route on this code (Codex and Qwen Code shrink history on context_length_exceeded).
  const contextLength = /maximum context length|context length|too many tokens|prompt is too long/i.test(err.message);
  return {
    error: {
      message: err.message,
      type: errorType(err.status),
      param: contextLength ? 'messages' : param,
      code: contextLength ? 'context_length_exceeded' : err.code.toLowerCase(),
    },
  };
}

export function renderChatError(err: PolarError): ErrorReply {
  return { status: err.status, body: openaiErrorBody(err) };
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 400 && status < 500) return 'invalid_request_error';
  return 'api_error';
}

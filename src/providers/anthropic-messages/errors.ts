import type { PolarError } from '../../core/errors.js';
import type { ErrorReply } from '../types.js';

/**
 * Anthropic's error object, `{type: "error", error: {type, message}}`. Claude Code matches on the
 * wording of some errors: a context overflow must say "prompt is too long" for it to compact.
 */
export function anthropicError(err: PolarError): { type: 'error'; error: { type: string; message: string } } {
  const contextLength = /maximum context length|context length|prompt is too long|too many tokens/i.test(err.message);
  return {
    type: 'error',
    error: {
      type: errorType(err.status),
      message: contextLength && !/^prompt is too long/i.test(err.message) ? `prompt is too long: ${err.message}` : err.message,
    },
  };
}

export function renderAnthropicError(err: PolarError): ErrorReply {
  return { status: err.status, body: anthropicError(err) };
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 400 && status < 500) return 'invalid_request_error';
  return 'api_error';
}

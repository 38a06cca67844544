import type { PolarError } from '../../core/errors.js';
import { openaiErrorBody } from '../openai-chat/errors.js';
import type { ErrorReply } from '../types.js';

/** Responses errors use OpenAI's error object; Codex routes on `code: context_length_exceeded`. */
export function renderResponsesError(err: PolarError): ErrorReply {
  return { status: err.status, body: openaiErrorBody(err) };
}

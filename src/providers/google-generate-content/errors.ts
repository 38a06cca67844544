import type { PolarError } from '../../core/errors.js';
import type { ErrorReply } from '../types.js';

/** Google's error object: `{error: {code, message, status}}` with the RPC status name. */
export function geminiError(err: PolarError): { error: { code: number; message: string; status: string } } {
  return { error: { code: err.status, message: err.message, status: rpcStatus(err.status) } };
}

export function renderGeminiError(err: PolarError): ErrorReply {
  return { status: err.status, body: geminiError(err) };
}

function rpcStatus(status: number): string {
  if (status === 400 || status === 413) return 'INVALID_ARGUMENT';
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'PERMISSION_DENIED';
  if (status === 404 || status === 405) return 'NOT_FOUND';
  if (status === 429) return 'RESOURCE_EXHAUSTED';
  if (status === 504) return 'DEADLINE_EXCEEDED';
  if (status === 499) return 'CANCELLED';
  if (status === 502 || status === 503) return 'UNAVAILABLE';
  return 'INTERNAL';
}

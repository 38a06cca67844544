import type { ServerResponse } from 'node:http';
import { PolarError } from '../core/errors.js';

export function sendJson(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Anything thrown inside a call, as a PolarError; an aborted call is always reported as such. */
export function toPolarError(err: unknown, signal?: AbortSignal): PolarError {
  if (signal?.aborted) return new PolarError('POLAR_CLIENT_ABORTED', 'harness disconnected', 499, { cause: err });
  if (err instanceof PolarError) return err;
  return new PolarError('POLAR_INTERNAL', `internal error: ${(err as Error)?.message ?? String(err)}`, 500, {
    cause: err,
  });
}

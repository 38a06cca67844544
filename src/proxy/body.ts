import type { IncomingMessage } from 'node:http';
import { PolarError } from '../core/errors.js';

/**
 * Reads a request body up to `limit` bytes. A declared Content-Length over the limit is refused
 * before reading; a chunked body is counted as it arrives (RFC 9112 §6.3: Transfer-Encoding wins
 * over Content-Length, so the declared length alone is not trusted). Past the limit the rest is
 * drained and dropped, not buffered, so the connection can still carry the 413.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    let settled = false;
    const fail = (err: PolarError) => {
      if (settled) return;
      settled = true;
      chunks = [];
      reject(err);
    };
    let chunks: Buffer[] = [];
    let size = 0;
    if (Number.isFinite(declared) && declared > limit) fail(tooLarge(limit));
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > limit) fail(tooLarge(limit));
      else chunks.push(chunk);
    });
    req.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, size).toString('utf8'));
    });
    req.on('error', (err) => fail(new PolarError('POLAR_CLIENT_ABORTED', `client connection failed: ${err.message}`, 499)));
    req.on('close', () => {
      if (!req.complete) fail(new PolarError('POLAR_CLIENT_ABORTED', 'client disconnected while sending the request', 499));
    });
  });
}

function tooLarge(limit: number): PolarError {
  return new PolarError('POLAR_BODY_TOO_LARGE', `request body exceeds ${limit} bytes (raise --max-body)`, 413);
}

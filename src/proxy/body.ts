import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { PolarError } from '../core/errors.js';

/** Deeper JSON is refused: no real request nests this far, and deeper would overflow the stack. */
export const MAX_JSON_DEPTH = 512;

/**
 * Reads a request body up to `limit` bytes. A declared Content-Length over the limit is refused
 * before reading; a chunked body is counted as it arrives (RFC 9112 §6.3: Transfer-Encoding wins
 * over Content-Length, so the declared length alone is not trusted). Past the limit the rest is
 * drained and dropped, not buffered, so the connection can still carry the 413. JSON is UTF-8
 * (RFC 8259 §8.1): invalid bytes are refused, not replaced with U+FFFD, so the recorded request is
 * exactly what was sent.
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
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      if (!isUtf8(bytes)) {
        fail(new PolarError('POLAR_BAD_REQUEST', 'request body is not valid UTF-8 (JSON must be UTF-8, RFC 8259 §8.1)', 400));
        return;
      }
      settled = true;
      resolve(bytes.toString('utf8'));
    });
    req.on('error', (err) => fail(new PolarError('POLAR_CLIENT_ABORTED', `client connection failed: ${err.message}`, 499)));
    req.on('close', () => {
      if (!req.complete) fail(new PolarError('POLAR_CLIENT_ABORTED', 'client disconnected while sending the request', 499));
    });
  });
}

/** Parses a request body, refusing nesting deeper than MAX_JSON_DEPTH before anything recurses into it. */
export function parseJsonBody(text: string): unknown {
  const depth = jsonDepthOver(text, MAX_JSON_DEPTH);
  if (depth) {
    throw new PolarError('POLAR_BAD_REQUEST', `request body nests deeper than ${MAX_JSON_DEPTH} levels`, 400);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new PolarError('POLAR_BAD_REQUEST', `request body is not valid JSON: ${(err as Error).message}`, 400);
  }
}

/** Whether arrays and objects in `text` nest deeper than `limit` (brackets inside strings ignored). */
export function jsonDepthOver(text: string, limit: number): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string: to the next quote not escaped by a backslash.
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

function tooLarge(limit: number): PolarError {
  return new PolarError('POLAR_BODY_TOO_LARGE', `request body exceeds ${limit} bytes (raise --max-body)`, 413);
}

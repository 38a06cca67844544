import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { PolarError } from '../errors.js';

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
export async function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return (await readBodyBytes(req, limit)).toString('utf8');
}

/** readBody's bytes, checked to be UTF-8 but not decoded (the model-call path reads them as bytes: wire-body.ts). */
export function readBodyBytes(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    let settled = false;
    let chunks: Buffer[] = [];
    let whole: Buffer | null = null;
    const fail = (err: PolarError) => {
      if (settled) return;
      settled = true;
      chunks = [];
      whole = null;
      reject(err);
    };
    let size = 0;
    if (Number.isFinite(declared) && declared > limit) fail(tooLarge(limit));
    // With a declared length (every harness sends one) the body is copied into one buffer of that
    // size as it arrives and each chunk let go: collecting the chunks and joining them at the end
    // held two copies of the body at once (4 concurrent 60 MB bodies peaked near 1 GB).
    if (!settled && Number.isInteger(declared) && declared > 0 && req.headers['transfer-encoding'] === undefined) whole = Buffer.allocUnsafeSlow(declared);
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      if (whole && size + chunk.length <= whole.length) chunk.copy(whole, size);
      else if (whole) {
        // More than declared (Node refuses this itself; kept safe): the chunks collected so far.
        chunks.push(whole.subarray(0, size), chunk);
        whole = null;
      } else chunks.push(chunk);
      size += chunk.length;
      if (size > limit) fail(tooLarge(limit));
    });
    req.on('end', () => {
      if (settled) return;
      const bytes = whole ? whole.subarray(0, size) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      // The listeners live as long as the request, which is the whole call: they must not keep
      // the chunks (a second copy of the body) while the server generates.
      chunks = [];
      whole = null;
      if (!isUtf8(bytes)) {
        fail(new PolarError('POLAR_BAD_REQUEST', 'request body is not valid UTF-8 (JSON must be UTF-8, RFC 8259 §8.1)', 400));
        return;
      }
      settled = true;
      resolve(bytes);
    });
    req.on('error', (err) => fail(new PolarError('POLAR_CLIENT_ABORTED', `client connection failed: ${err.message}`, 499, { cause: err })));
    req.on('close', () => {
      if (!req.complete) fail(new PolarError('POLAR_CLIENT_ABORTED', 'client disconnected while sending the request', 499));
    });
  });
}

/**
 * Parses a request body, refusing nesting deeper than MAX_JSON_DEPTH before anything recurses into
 * it. V8's JSON.parse is iterative (any depth parses without touching the stack); the recursive
 * code after it (codecs, JSON.stringify) is not, so the parsed value's depth is checked with a walk
 * that keeps its own stack: it visits only objects and arrays, a few thousand in a 100 KB request,
 * ~20× cheaper than scanning the text's characters.
 */
export function parseJsonBody(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new PolarError('POLAR_BAD_REQUEST', `request body is not valid JSON: ${(err as Error).message}`, 400, { cause: err });
  }
  if (depthOver(value, MAX_JSON_DEPTH)) {
    throw new PolarError('POLAR_BAD_REQUEST', `request body nests deeper than ${MAX_JSON_DEPTH} levels`, 400);
  }
  return value;
}

/** Whether arrays and objects in `root` nest deeper than `limit` (the top level is depth 1). */
export function depthOver(root: unknown, limit: number): boolean {
  if (root === null || typeof root !== 'object') return false;
  const nodes: object[] = [root];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v: unknown = node[i];
        if (v !== null && typeof v === 'object') {
          nodes.push(v);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const key in node) {
        const v: unknown = (node as Record<string, unknown>)[key];
        if (v !== null && typeof v === 'object') {
          nodes.push(v);
          depths.push(depth + 1);
        }
      }
    }
  }
  return false;
}

function tooLarge(limit: number): PolarError {
  return new PolarError('POLAR_BODY_TOO_LARGE', `request body exceeds ${limit} bytes (raise --max-body)`, 413);
}

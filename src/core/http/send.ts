import type { ServerResponse } from 'node:http';

/**
 * The replies every polar HTTP server sends: a complete body with its length (no chunked framing
 * for a reply that is already whole). Once headers are out (a stream that failed midway) nothing
 * more can be said in a status line: the reply is ended instead.
 */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** `value` as JSON. */
export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  sendJsonText(res, status, JSON.stringify(value), headers);
}

/** Plain text (an ASGI server's bare `Internal Server Error`). */
export function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

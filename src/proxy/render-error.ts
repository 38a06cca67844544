import type { ServerResponse } from 'node:http';
import type { PolarError } from '../core/errors.js';
import type { ProviderCodec } from '../providers/types.js';
import { sendJsonText } from '../core/http/send.js';

/** An error reply before any bytes went out, in the caller's provider shape, serialised once. */
export interface RenderedError {
  status: number;
  text: string;
}

/**
 * The one place an error becomes the bytes a harness reads before a reply has started (inside a
 * stream, the codec's translator renders it as an event). Callers record `text` as the reply the
 * call got, then send it.
 */
export function renderError(codec: ProviderCodec, err: PolarError): RenderedError {
  const reply = codec.renderError(err);
  return { status: reply.status, text: JSON.stringify(reply.body) };
}

export function sendError(res: ServerResponse, rendered: RenderedError, headers: Record<string, string> = {}): void {
  sendJsonText(res, rendered.status, rendered.text, headers);
}

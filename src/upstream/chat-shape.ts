import type { ChatCompletion, ChatCompletionChunk } from '../core/chat.js';
import { isRecord } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import { parseJsonWithIdArrays } from './id-arrays.js';
/**
 * Parses an upstream JSON text (prompt id arrays read straight into numbers: id-arrays.ts); anything
 * unparseable is a protocol error naming what it was.
 */
export function parseUpstreamJson(input: string | Buffer, what: string): unknown {
  try {
    return parseJsonWithIdArrays(input);
  } catch (err) {
    const text = typeof input === 'string' ? input : input.toString('utf8');
    const head = text.length > 200 ? `${text.slice(0, 200)}…` : text;
    throw new PolarError('POLAR_UPSTREAM_PROTOCOL', `upstream ${what} is not valid JSON: ${head}`, 502, { cause: err });
  }
}

/** The minimal shape checks every OpenAI-compatible reply must pass before anything reads it. */
export function expectCompletionShape(json: unknown): ChatCompletion {
  if (!isRecord(json) || !Array.isArray(json.choices)) {
    throw new PolarError('POLAR_UPSTREAM_PROTOCOL', 'upstream reply is not a chat completion (no choices array)', 502);
  }
  return json as ChatCompletion;
}

/** A server's `{"error": …}` in place of a reply or stream event, thrown as the upstream error it is. */
export function throwIfErrorBody(json: unknown, where = 'mid-stream'): void {
  if (!isRecord(json) || json.error === undefined || json.error === null) return;
  const e = json.error;
  const message = typeof e === 'string' ? e : isRecord(e) && typeof e.message === 'string' ? e.message : JSON.stringify(e);
  throw new PolarError('POLAR_UPSTREAM_STATUS', `upstream error ${where}: ${message}`, 502);
}

export function expectChunkShape(json: unknown): ChatCompletionChunk {
  throwIfErrorBody(json);
  if (!isRecord(json) || !Array.isArray(json.choices)) {
    throw new PolarError('POLAR_UPSTREAM_PROTOCOL', 'upstream stream chunk is not a chat completion chunk (no choices array)', 502);
  }
  return json as ChatCompletionChunk;
}

import { isUtf8 } from 'node:buffer';
import type { CanonicalRequest, ReplyRequest } from '../core/chat.js';
import { normalizeRequest } from '../providers/normalize.js';
import type { ProviderCodec } from '../providers/types.js';
import { applySamplingPolicy, PASS_THROUGH, type SamplingPolicy, type SamplingRecord, samplingRecord } from '../upstream/sampling-policy.js';
import type { CallContext, Upstream, UpstreamRequest } from '../upstream/types.js';
import { parseJsonBody } from '../core/http/body.js';
import { spliceBody } from './body-splice.js';

/** What the record and the reply take from a request, besides its bytes. */
export interface RequestFacts {
  reply: ReplyRequest;
  /** The model the call goes to: the proxy's --model, else the one requested. */
  model: string;
  stream: boolean;
  toolCount: number;
}

export function requestFacts(canonical: CanonicalRequest, model: string): RequestFacts {
  return {
    reply: { requestedModel: canonical.requestedModel, client: canonical.client, codecState: canonical.codecState },
    model,
    stream: canonical.stream,
    toolCount: canonical.body.tools?.length ?? 0,
  };
}

/**
 * The upstream request built straight from the request's bytes, for the call path.
 *
 * Decoding 100 KB of UTF-8 with non-ASCII text into a JS string costs ~1 ms on Node 20, and
 * encoding the rewritten body back costs as much again; both sat between the harness's last byte
 * and the upstream's first. JSON's structure is ASCII, and a text-in upstream's body only moves the
 * request's strings (into messages, tools, stop sequences) without reading them. So the body is
 * read one byte per character (latin1: every string then holds its UTF-8 bytes), decoded and
 * rewritten as usual, serialised, and written back one byte per character: the strings' bytes go
 * upstream exactly as the harness sent them, with no UTF-8 work at all (~0.3 ms instead of ~2.5).
 *
 * This holds only where no string is interpreted, so it is used only when:
 * - the upstream says it only moves strings, by offering `prepareBody`;
 * - the body has no `\u` escape above U+007F (such an escape parses to a real character, which
 *   would mix with byte characters); `\u0000`–`\u007F` are ASCII in both readings;
 * - decoding needs nothing recorded earlier (a Responses `previous_response_id`: those texts are
 *   real strings);
 * and its result is checked: every character a byte, and the bytes valid UTF-8. Anything else (or
 * any error, which the ordinary path then reports in its own words) takes the ordinary path. What
 * the record and the reply's encoder read of the request (`RequestFacts`) is realized as text from
 * the same reading, after the request is sent. The body's values shared with the request are copied
 * from the request's `bytes` (body-splice.ts): OpenAI Chat's messages and tools, ~0.3 ms and ~200 KB
 * of garbage a 100 KB call.
 */
export function prepareFromBytes(
  json: unknown,
  codec: ProviderCodec,
  upstream: Upstream,
  opts: {
    path: string;
    contextWindow: number | null;
    maxTokens?: number | null;
    servedModel: string | null;
    call: CallContext;
    bytes: Buffer;
    /** Left out: pass-through. */
    sampling?: SamplingPolicy;
  },
): { stream: boolean; upstreamReq: UpstreamRequest; facts: () => RequestFacts; sampling: SamplingRecord } | null {
  if (!upstream.prepareBody) return null;
  try {
    const decoded = codec.decodeRequest(json, { path: opts.path, lookupResponse: needsRealStrings, byteStrings: true });
    const normalized = normalizeRequest(decoded, { contextWindow: opts.contextWindow, maxTokens: opts.maxTokens ?? null, byteStrings: true });
    // The policy keeps the request's own values for what it allows, so they are still copied from the bytes.
    const policy = opts.sampling ?? PASS_THROUGH;
    const pinned = applySamplingPolicy(normalized, policy, upstream.kind);
    const canonical = pinned.req;
    const model = opts.servedModel ?? canonical.requestedModel;
    if (!model) return null;
    const prepared = upstream.prepareBody(canonical, model, opts.call);
    const wire = spliceBody(opts.bytes, json, prepared.body);
    if (wire === null || !isUtf8(wire)) return null;
    const sampling = samplingRecord(policy, pinned, prepared.body, realize);
    // The record and the reply need only a few of the request's facts: read out now, so the decoded
    // request is not held while the server generates, and realized as text from this reading (after
    // the send) instead of decoding the request a second time.
    const read = requestFacts(canonical, model);
    const facts = () => ({ ...read, reply: realize(read.reply) as ReplyRequest, model: opts.servedModel ?? (realize(model) as string) });
    // The bytes are the request from here on: the body object and its serialisation are let go so
    // an in-flight call does not hold two more copies of it while the server generates.
    return { stream: canonical.stream, upstreamReq: { ...prepared, body: {}, text: '', bytes: wire }, facts, sampling };
  } catch {
    return null;
  }
}

/**
 * The body (valid UTF-8) parsed one byte per character: every string holds its UTF-8 bytes. The
 * codecs leave the value as parsed, so one parse serves both prepareFromBytes and, through
 * `realize`, the request as text. Undefined when an escape above U+007F rules the reading out, or
 * the body is not JSON (the text path then says why, with positions and excerpts in characters).
 */
export function parseAsBytes(bytes: Buffer): unknown {
  const text = bytes.toString('latin1');
  if (hasNonAsciiEscape(text)) return undefined;
  try {
    return parseJsonBody(text);
  } catch {
    return undefined;
  }
}

/**
 * A value parseAsBytes gave, as JSON.parse of the decoded text gives it: each string holding bytes
 * above 0x7F decoded on its own (a string's bytes are whole UTF-8 sequences: quotes and backslashes
 * are ASCII). A fifth of the cost of decoding the body whole on Node 20, where a decoded 100 KB
 * text is one large-object string that is slow to allocate while its short strings are not.
 */
export function realize(value: unknown): unknown {
  if (typeof value === 'string') return HIGH_BYTE.test(value) ? Buffer.from(value, 'latin1').toString('utf8') : value;
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(realize);
  const out: Record<string, unknown> = {};
  for (const raw in value) {
    const key = HIGH_BYTE.test(raw) ? Buffer.from(raw, 'latin1').toString('utf8') : raw;
    const v = realize((value as Record<string, unknown>)[raw]);
    // An own `__proto__` (JSON.parse makes one) must stay a property, not become the prototype.
    if (key === '__proto__') Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    else out[key] = v;
  }
  return out;
}

/** A `\u` escape that parses to a character above U+007F (`\u` not followed by 00 and 0–7; a `\\u` also counts, harmlessly). */
function hasNonAsciiEscape(text: string): boolean {
  for (let at = text.indexOf('\\u'); at >= 0; at = text.indexOf('\\u', at + 2)) {
    if (!(text.charCodeAt(at + 2) === 0x30 && text.charCodeAt(at + 3) === 0x30 && text.charCodeAt(at + 4) >= 0x30 && text.charCodeAt(at + 4) <= 0x37))
      return true;
  }
  return false;
}

const HIGH_BYTE = /[\x80-\xff]/;

function needsRealStrings(): never {
  throw new Error('earlier responses are real strings: take the ordinary path');
}

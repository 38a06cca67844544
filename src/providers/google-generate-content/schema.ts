import { isRecord } from '../../core/chat.js';

/**
 * Gemini's `parameters` use the API's OpenAPI-style Schema (upper-case `type` such as "OBJECT",
 * `nullable`, `propertyOrdering`); chat templates and vLLM's guided decoding want JSON Schema.
 * Types are lower-cased, `nullable` becomes a `null` alternative, Gemini-only keys are dropped.
 * `parametersJsonSchema` is JSON Schema already and is used as it is.
 */
export function toJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (!isRecord(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'propertyOrdering' || key === 'nullable') continue;
    // ASCII only: a type name is ASCII, and a byte-string reading (DecodeContext.byteStrings) must not change.
    if (key === 'type' && typeof value === 'string') out.type = /^[\x00-\x7f]*$/.test(value) ? value.toLowerCase() : value;
    else if (key === 'properties' && isRecord(value)) out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJsonSchema(v)]));
    else if (key === 'items' || key === 'anyOf' || key === 'additionalProperties') out[key] = toJsonSchema(value);
    else out[key] = value;
  }
  if (schema.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

import type { TokenIds } from '../core/tokens.js';
import { PolarError } from '../core/errors.js';

/** A server's token-id array, checked (integers in range) but never changed; null when absent. */
export function idArray(value: unknown, field: string): number[] | null {
  if (value === undefined || value === null) return null;
  if (value instanceof Uint32Array) throw protocolError(`${field}: a prompt id array where sampled ids were expected`);
  if (!Array.isArray(value)) throw protocolError(`${field} is not an array`);
  for (let i = 0; i < value.length; i++) {
    const v = value[i];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw protocolError(`${field}[${i}] is not a token id: ${JSON.stringify(v)}`);
    }
  }
  return value as number[];
}

/**
 * A reply's prompt ids: read straight into a Uint32Array when the reply was parsed by
 * parseJsonWithIdArrays (already checked there), else checked as idArray checks them.
 */
export function promptIdArray(value: unknown, field: string): TokenIds | null {
  if (value instanceof Uint32Array) return value;
  return idArray(value, field);
}

/** A logprob as received; a non-number becomes NaN, so verification names it instead of hiding it. */
export function logprobValue(value: unknown): number {
  return typeof value === 'number' ? value : Number.NaN;
}

export function protocolError(message: string): PolarError {
  return new PolarError('POLAR_UPSTREAM_PROTOCOL', message, 502);
}

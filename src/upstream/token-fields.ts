import { PolarError } from '../core/errors.js';

/** A server's token-id array, checked (integers in range) but never changed; null when absent. */
export function idArray(value: unknown, field: string): number[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw protocolError(`${field} is not an array`);
  for (let i = 0; i < value.length; i++) {
    const v = value[i];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw protocolError(`${field}[${i}] is not a token id: ${JSON.stringify(v)}`);
    }
  }
  return value as number[];
}

/** A logprob as received; a non-number becomes NaN, so verification names it instead of hiding it. */
export function logprobValue(value: unknown): number {
  return typeof value === 'number' ? value : Number.NaN;
}

export function protocolError(message: string): PolarError {
  return new PolarError('POLAR_UPSTREAM_PROTOCOL', message, 502);
}

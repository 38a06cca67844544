import { timingSafeEqual } from 'node:crypto';

/**
 * Whether a presented secret (a token, a session key's secret) equals the expected one, in time that
 * does not depend on where they first differ (a byte-by-byte `===` leaks how much of a guess was
 * right). Only the lengths are compared openly: every secret polar makes has a fixed length.
 */
export function sameSecret(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

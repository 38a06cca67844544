import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

/**
 * Sortable, collision-resistant ids: 10 chars of millisecond time then `randomChars` random chars,
 * so ids created later sort later and `ORDER BY id` follows creation order across processes.
 */
export function newId(prefix: string, randomChars = 10): string {
  let time = Date.now();
  let head = '';
  for (let i = 0; i < 10; i++) {
    head = ALPHABET[time % 32] + head;
    time = Math.floor(time / 32);
  }
  const bytes = randomBytes(randomChars);
  let tail = '';
  for (let i = 0; i < randomChars; i++) tail += ALPHABET[bytes[i]! % 32];
  return `${prefix}_${head}${tail}`;
}

/** Session names given by users or harnesses: short, URL-path safe, no separators that need escaping. */
export const SESSION_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export function isValidSessionName(name: string): boolean {
  return SESSION_NAME_PATTERN.test(name);
}

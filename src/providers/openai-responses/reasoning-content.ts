/**
 * Reasoning handed to the harness as `encrypted_content` (Codex sends `store: false` and asks for
 * `reasoning.encrypted_content`, then returns the item verbatim next turn). polar's is not
 * encrypted: it is the reasoning text, encoded, so the item maps back to the same text.
 */
const PREFIX = 'polar1:';

export function encodeReasoning(text: string): string {
  return PREFIX + Buffer.from(text, 'utf8').toString('base64');
}

/**
 * The text inside polar's own encrypted_content; null for anything else (e.g. OpenAI's). With
 * `byteStrings`, as its UTF-8 bytes one per character, like the rest of such a request.
 */
export function decodeReasoning(encrypted: string, byteStrings = false): string | null {
  if (!encrypted.startsWith(PREFIX)) return null;
  return Buffer.from(encrypted.slice(PREFIX.length), 'base64').toString(byteStrings ? 'latin1' : 'utf8');
}

import { createHash } from 'node:crypto';

/**
 * A deterministic signature for thinking blocks polar produces. The harness must send thinking
 * blocks back verbatim; the signature lets it (and us) check that, and being a pure function of the
 * text it keeps a re-sent history byte-identical from turn to turn (prefix caching and merging
 * depend on that). The block's own `thinking` text is what maps back to reasoning.
 */
export function thinkingSignature(thinking: string): string {
  return `polar1.${createHash('sha256').update(thinking, 'utf8').digest('base64')}`;
}

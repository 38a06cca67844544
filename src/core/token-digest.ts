import { createHash } from 'node:crypto';
import { packFloat64, packUint32 } from './token-packing.js';

const TAG = Buffer.from('polar-tokens/1\0');
const NONE = 0xffffffff;

/**
 * A call's token data, fingerprinted when it is captured: SHA-256 over the prompt ids, the sampled
 * ids (each as little-endian uint32) and the logprobs (little-endian float64, every bit), each
 * preceded by its length (or a marker for none). `verify-faithfulness` recomputes it from what the
 * database holds, so an id flipped, two ids swapped, an array cut short or a logprob changed in its
 * last bit after capture is caught, whatever the storage layout does in between.
 */
export function tokenDigest(promptIds: Uint8Array | null, sampledIds: Uint8Array | null, logprobs: Uint8Array | null): string {
  const hash = createHash('sha256').update(TAG);
  for (const [part, width] of [
    [promptIds, 4],
    [sampledIds, 4],
    [logprobs, 8],
  ] as const) {
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(part ? part.byteLength / width : NONE);
    hash.update(length);
    if (part) hash.update(part);
  }
  return hash.digest('hex');
}

/** The digest of token arrays: as parsed from the upstream's reply, or typed arrays as stored (hashed as their own bytes). */
export function digestOfTokens(t: { promptIds: ArrayLike<number> | null; sampledIds: ArrayLike<number> | null; logprobs: ArrayLike<number> | null }): string {
  return tokenDigest(t.promptIds ? packUint32(t.promptIds) : null, t.sampledIds ? packUint32(t.sampledIds) : null, t.logprobs ? packFloat64(t.logprobs) : null);
}

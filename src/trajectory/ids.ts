/**
 * Logprobs as the trajectory code reads them: JS arrays (tests, traces read back from JSONL) or
 * typed arrays (the store's, store/delta-read.ts). Ids compare with core/tokens.ts sameIds and
 * commonPrefixLength, natively between typed arrays.
 */
export type Logprobs = readonly number[] | Float64Array;

import { describe, expect, it } from 'vitest';
import { fitSftBatch } from './sft-batch.js';

describe('fitSftBatch (NeMo-RL SFT drops an incomplete batch)', () => {
  it('keeps a batch the data fills', () => {
    expect(fitSftBatch({ examples: 32, globalBatch: 32, dataParallel: 1, microBatch: 1 })).toEqual({ batch: 32, notice: null });
    expect(fitSftBatch({ examples: 100, globalBatch: 32, dataParallel: 2, microBatch: 1 })).toEqual({ batch: 32, notice: null });
  });

  it('lowers a batch larger than the data to the data, and says so', () => {
    const fit = fitSftBatch({ examples: 4, globalBatch: 32, dataParallel: 1, microBatch: 1 });
    expect(fit).toMatchObject({ batch: 4 });
    expect('notice' in fit && fit.notice).toMatch(/4 examples, fewer than the batch of 32: .*zero steps; lowered policy\.train_global_batch_size to 4$/);
  });

  it('rounds down to whole micro-batches on every data-parallel rank', () => {
    const fit = fitSftBatch({ examples: 7, globalBatch: 32, dataParallel: 2, microBatch: 1 });
    expect(fit).toMatchObject({ batch: 6 });
    expect('notice' in fit && fit.notice).toMatch(/a multiple of 2: 2 data-parallel × micro-batch 1; 1 example left out of each epoch/);
    expect(fitSftBatch({ examples: 9, globalBatch: 32, dataParallel: 2, microBatch: 2 })).toMatchObject({ batch: 8 });
  });

  it('refuses data smaller than one unit, with the fix', () => {
    const fit = fitSftBatch({ examples: 1, globalBatch: 32, dataParallel: 2, microBatch: 1 });
    expect('error' in fit && fit.error).toMatch(/1 example, fewer than one batch of 2 .*zero steps\. Export more accepted samples/);
    expect(fitSftBatch({ examples: 0, globalBatch: 32, dataParallel: 1, microBatch: 1 })).toHaveProperty('error');
  });
});

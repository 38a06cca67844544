/**
 * The SFT global batch for a data set of a given size (pure). NeMo-RL's SFT dataloader takes
 * `policy.train_global_batch_size` examples per step with drop_last=True (nemo_rl/algorithms/sft.py
 * :159-166 at 7ea279a), so fewer examples than the batch make zero steps, and the epoch loop runs on
 * printing empty epochs. The batch is then split evenly over the data-parallel ranks, each taking
 * whole micro-batches (dtensor_policy_worker_v2.py:417 `gbs // dp_size`, batched_data_dict.py:1011
 * asserts the share divides by the micro-batch). So a batch larger
 * than the data is lowered to the largest multiple of dp × micro-batch that the data fills, and a
 * data set smaller than one such unit is refused.
 */
export interface SftBatchInput {
  examples: number;
  globalBatch: number;
  /** GPUs / (tensor parallel × context parallel). */
  dataParallel: number;
  microBatch: number;
}

export type SftBatch = { batch: number; notice: string | null } | { error: string };

export function fitSftBatch(i: SftBatchInput): SftBatch {
  if (i.examples >= i.globalBatch) return { batch: i.globalBatch, notice: null };
  const unit = i.dataParallel * i.microBatch;
  const batch = Math.floor(i.examples / unit) * unit;
  const cite = 'NeMo-RL drops an incomplete batch (sft.py:159-166), so it would train zero steps';
  if (batch === 0) {
    return {
      error: `the SFT data has ${i.examples} example${i.examples === 1 ? '' : 's'}, fewer than one batch of ${unit} (${i.dataParallel} data-parallel rank${i.dataParallel === 1 ? '' : 's'} × micro-batch ${i.microBatch}): ${cite}. Export more accepted samples (a lower --min-reward, more rollouts)${i.dataParallel > 1 ? ', or train on fewer GPUs' : ''}`,
    };
  }
  return {
    batch,
    notice: `the SFT data has ${i.examples} examples, fewer than the batch of ${i.globalBatch}: ${cite}; lowered policy.train_global_batch_size to ${batch}${batch === i.examples ? '' : ` (a multiple of ${unit}: ${i.dataParallel} data-parallel × micro-batch ${i.microBatch}; ${i.examples - batch} example${i.examples - batch === 1 ? '' : 's'} left out of each epoch)`}`,
  };
}

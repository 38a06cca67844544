import { describe, expect, it } from 'vitest';
import { initialProgress, maskedWarning, readLine, zeroAdvantageWarning } from './progress.js';

describe('NeMo-RL progress lines', () => {
  it('phases, steps and the results of each step, as grpo.py prints them', () => {
    const p = initialProgress();
    const lines = [
      '============================================================',
      '                  SETUP COMPLETE',
      '  Total setup time: 93.4s',
      '',
      '========================= Step 3/20 =========================',
      '▶ Preparing batch...',
      '▶ Generating responses for batch of size 8...',
      '▶ Processing rewards...,',
      '▶ Training policy...',
      '',
      '📊 Training Results:',
      '  • Loss: -0.0123',
      '  • Generation KL Error: 0.0011',
      '  • Avg Reward: 0.6250',
      '  • Mean Generation Length: 812.2500',
      '',
      '⏱️  Timing:',
      '  • Total step time: 42.17s',
      '  • generation: 30.12s (71.4%)',
    ];
    const done = lines.map((l) => readLine(p, l)).filter(Boolean);
    expect(p.setupSeconds).toBe(93.4);
    expect(done).toEqual([{ step: 3, maxSteps: 20, epoch: null, loss: -0.0123, reward: 0.625, stepTimeS: 42.17, generationLength: 812.25, advantages: null }]);
    expect(p.phase).toBe('training');
    readLine(p, 'Saving checkpoint for step 3...');
    expect(p.phase).toBe('checkpoint');
    readLine(p, '  • Avg Filtered Reward: 0.5000');
    expect(p.current.reward).toBe(0.5);
  });

  it('steps count across epochs: the banner starts again at Step 1 each epoch, polar does not', () => {
    // Two epochs of 3 steps, as grpo.py prints them (Epoch banner, then Step k/min(batches, max_num_steps)).
    const p = initialProgress(5);
    const epoch = (e: number, steps: number[]) => [
      `========================= Epoch ${e}/2 =========================`,
      ...steps.flatMap((k) => [`========================= Step ${k}/3 =========================`, '  • Loss: 0.1000', '  • Total step time: 1.00s']),
    ];
    const done = [...epoch(1, [1, 2, 3]), ...epoch(2, [1, 2])].map((l) => readLine(p, l)).filter((s) => s !== null);
    expect(done.map((s) => [s.step, s.epoch, s.maxSteps])).toEqual([
      [1, 1, 5],
      [2, 1, 5],
      [3, 1, 5],
      [4, 2, 5],
      [5, 2, 5],
    ]);
    expect(new Set(p.completed.map((s) => s.step)).size).toBe(5);
    expect([p.step, p.epoch, p.epochs]).toEqual([5, 2, 2]);
    // Without the run's max_num_steps, the banners' count: epochs × steps per epoch.
    const q = initialProgress();
    for (const l of epoch(2, [1])) readLine(q, l);
    expect([q.step, q.maxSteps]).toEqual([4, 6]);
  });
  it("takes no advantages from stdout (NeMo-RL logs them to TensorBoard only), and says loudly when a step's are all 0", () => {
    // A line shaped like the logger's names is not NeMo-RL output: reading it would let a test pass
    // through a path no real run takes (run-train.ts reads them from TensorBoard).
    const p = initialProgress();
    const lines = [
      '========================= Step 1/1 =========================',
      '  • Loss: 0.0000',
      '  • Avg Reward: 0.5000',
      '  • advantages/min: 0.0000',
      '  • advantages/max: 0.0000',
      '  • Total step time: 1.00s',
    ];
    const [done] = lines.map((l) => readLine(p, l)).filter((s) => s !== null);
    expect(done!.advantages).toBeNull();
    expect(zeroAdvantageWarning(done!)).toBeNull();
    // Once TensorBoard's arrive (run-train.ts sets them on the completed step): all 0 is said, else nothing.
    expect(zeroAdvantageWarning({ ...done!, advantages: { mean: 0, min: 0, max: 0 } })).toMatch(/step 1: every advantage is 0 .*mean 0\.5.*first prompt/);
    expect(zeroAdvantageWarning({ ...done!, advantages: { mean: 0, min: -1.1547, max: 1.1547 } })).toBeNull();
    // Rounding noise of equal non-integer rewards moves nothing either.
    expect(zeroAdvantageWarning({ ...done!, advantages: { mean: 0, min: -5e-7, max: 5e-7 } })).toMatch(/every advantage is 0/);
  });

  it("says when more than a quarter of a step's samples were masked, naming the kinds", () => {
    const p = initialProgress();
    const [done] = ['===== Step 2/3 =====', '  • Total step time: 1.00s'].map((l) => readLine(p, l)).filter((s) => s !== null);
    expect(maskedWarning(done!)).toBeNull();
    expect(maskedWarning({ ...done!, masked: { share: 0.25, byKind: { split: 0.25 } } })).toBeNull();
    expect(maskedWarning({ ...done!, masked: { share: 1, byKind: { split: 0.75, timeout: 0.25, error: 0 } } })).toBe(
      'step 2: 100% of its samples were masked and trained nothing (75% not append-only (the main agent split into several traces: compaction, history trimming, or a re-rendered history); 25% ran past their time budget); polar gym-agent\'s reasons are in train.log ("masked"). --max-masked-share stops a run at such a step',
    );
  });
});

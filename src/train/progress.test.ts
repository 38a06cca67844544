import { describe, expect, it } from 'vitest';
import { initialProgress, readLine } from './progress.js';

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
    expect(done).toEqual([{ step: 3, maxSteps: 20, loss: -0.0123, reward: 0.625, stepTimeS: 42.17, generationLength: 812.25 }]);
    expect(p.phase).toBe('training');
    readLine(p, 'Saving checkpoint for step 3...');
    expect(p.phase).toBe('checkpoint');
    readLine(p, '  • Avg Filtered Reward: 0.5000');
    expect(p.current.reward).toBe(0.5);
  });
});

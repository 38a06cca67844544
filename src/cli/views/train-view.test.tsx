import { EventEmitter } from 'node:events';
import { render } from 'ink-testing-library';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../../../test/support/wait.js';
import { initialProgress, readLine } from '../../train/progress.js';
import { TrainView } from './train-view.js';

describe('the polar train live view', () => {
  it("shows the phase, step N/M, the last step's loss and reward, GPU memory and the latest sessions as updates arrive", async () => {
    const updates = new EventEmitter();
    const progress = initialProgress();
    const { lastFrame } = render(
      <TrainView title="polar train grpo · test" runDir="/runs/x" updates={updates} initial={{ progress, gpuMemoryMiB: null, sessions: [] }} />,
    );
    expect(lastFrame()).toMatch(/step 0\/\?/);
    for (const line of [
      '========================= Step 2/10 =========================',
      '▶ Training policy...',
      '  • Loss: 0.2500',
      '  • Avg Reward: 0.7500',
      '  • Total step time: 12.50s',
    ])
      readLine(progress, line);
    updates.emit('update', {
      progress,
      gpuMemoryMiB: [20480],
      sessions: [
        { sessionId: 'ses_1', taskId: 'js-sum', reward: 1, status: 'completed' },
        { sessionId: 'ses_2', taskId: 'py-fizzbuzz', reward: null, status: 'error' },
      ],
    });
    // Drawn on the next render, not at once: wait for the frame, never a fixed pause.
    await waitUntil('the view to show step 2', () => /step 2\/10/.test(lastFrame() ?? ''), { everyMs: 10, timeoutMs: 5000 });
    const frame = lastFrame()!;
    expect(frame).toMatch(/step 2\/10 ██/);
    expect(frame).toMatch(/loss 0\.2500 {3}mean reward 0\.7500 {3}step time 12\.5 s {3}GPU 20\.0 GiB/);
    expect(frame).toMatch(/ses_1 {2}js-sum {2}reward 1/);
    expect(frame).toMatch(/ses_2 {2}py-fizzbuzz {2}error/);
    expect(frame).toMatch(/log \/runs\/x\/train\.log/);
    expect(frame).not.toMatch(/advantages/);
    // The step's advantages as they arrive after its results (run-train.ts reads NeMo-RL's from TensorBoard): all 0 is said.
    progress.completed.at(-1)!.advantages = { mean: 0, min: 0, max: 0 };
    updates.emit('update', { progress, gpuMemoryMiB: [20480], sessions: [] });
    await waitUntil('the view to show the advantages', () => /advantages/.test(lastFrame() ?? ''), { everyMs: 10, timeoutMs: 5000 });
    expect(lastFrame()).toMatch(/advantages min 0 {2}max 0 {2}mean 0 {3}every advantage 0 in step 2: it did not train/);
  });
});

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { keepYoungGenerationSmall } from './young-generation.js';

const run = promisify(execFile);
const MODULE = new URL('./young-generation.ts', import.meta.url).href;

/**
 * The young generation's size (MiB) when the setting is made, and its largest size after, in a
 * fresh node process that keeps a window of live objects while it allocates, as a proxy keeps its
 * in-flight calls: without the setting V8 grows the space to its maximum.
 */
async function youngGeneration(keepSmall: boolean, nodeOptions = ''): Promise<{ atStart: number; peak: number }> {
  const script = `
    import v8 from 'node:v8';
    import { keepYoungGenerationSmall } from ${JSON.stringify(MODULE)};
    const young = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576;
    const atStart = young();
    if (${keepSmall}) keepYoungGenerationSmall();
    let live = [];
    let peak = 0;
    for (let i = 0; i < 3000; i++) {
      live.push(new Array(1000).fill(i));
      if (live.length > 300) live = live.slice(150);
      peak = Math.max(peak, young());
    }
    console.log(JSON.stringify({ atStart, peak }));`;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    env: { ...process.env, NODE_OPTIONS: nodeOptions },
  });
  return JSON.parse(stdout) as { atStart: number; peak: number };
}

describe('keepYoungGenerationSmall', () => {
  it('holds the young generation at its starting size where V8 would grow it', async () => {
    const [grown, kept] = await Promise.all([youngGeneration(false), youngGeneration(true)]);
    expect(grown.peak).toBeGreaterThanOrEqual(Math.max(8, 2 * grown.atStart));
    expect(kept.peak).toBe(kept.atStart);
    expect(kept.peak).toBeLessThanOrEqual(4);
  });

  it('leaves the young generation to semi-space flags the user gave node', async () => {
    expect(keepYoungGenerationSmall('--max-old-space-size=512 --max-semi-space-size=4', [])).toBe(false);
    expect(keepYoungGenerationSmall('', ['--semi_space_growth_factor=3'])).toBe(false);
    const theirs = await youngGeneration(true, '--max-semi-space-size=4');
    expect(theirs.peak).toBe(8);
  });
});

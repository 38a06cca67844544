import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { qwen3ModelDir } from '../core/bundled-tokenizer.js';
import { budgetProblem, chooseTokenizer, DEFAULT_SESSION_TOKENS, longestTaskPrompt, neededSeqLen, splitProblem, type FirstPrompt } from './first-prompt.js';
import { firstDifference } from './prompt-diff.js';
import { removeTree } from '../../test/support/remove-tree.js';

const measured: FirstPrompt = {
  harness: 'claude-code',
  version: '2.1.0',
  tokenizer: 'bundled:qwen3',
  tokens: 11_600,
  tools: 12,
  mockTokens: 11_600,
  difference: null,
  note: null,
  cached: false,
};

describe('the context budget', () => {
  it('needs the first prompt, the task text and a useful session, rounded up to a multiple of 1024', () => {
    expect(neededSeqLen(11_600, 50, DEFAULT_SESSION_TOKENS)).toBe(20_480);
    expect(neededSeqLen(1024, 0, 1024)).toBe(2048);
  });

  it('refuses a length the first prompt fills, and one that leaves less than a session, with the size that fits', () => {
    expect(budgetProblem(measured, 50, 8192, DEFAULT_SESSION_TOKENS)).toMatch(
      /^--max-seq-len 8192 is too small for claude-code 2\.1\.0: its first prompt is 11600 tokens .*first prompt alone does not fit.*Use --max-seq-len 20480 or more$/,
    );
    expect(budgetProblem(measured, 50, 16_384, DEFAULT_SESSION_TOKENS)).toMatch(/leaves 4734 tokens for the whole session/);
    expect(budgetProblem(measured, 50, 20_480, DEFAULT_SESSION_TOKENS)).toBeNull();
    expect(budgetProblem(measured, 50, 16_384, 4096)).toBeNull();
  });

  it('counts with --tokenizer, else a local model folder with a tokenizer, else the bundled Qwen3 with a note', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-fp-'));
    try {
      fs.copyFileSync(path.join(qwen3ModelDir(), 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
      expect(chooseTokenizer(dir)).toMatchObject({ location: dir, note: null });
      const noCache = { HF_HUB_CACHE: path.join(dir, 'empty-hub') };
      expect(chooseTokenizer('Qwen/Qwen3-8B', undefined, noCache)).toMatchObject({
        location: 'bundled:qwen3',
        note: expect.stringContaining('--model Qwen/Qwen3-8B is neither a local folder'),
      });
      // A hub id already downloaded: its snapshot in the Hugging Face cache.
      const snapshot = path.join(dir, 'hub', 'models--Qwen--Qwen3-8B', 'snapshots', 'abc123');
      fs.mkdirSync(snapshot, { recursive: true });
      fs.mkdirSync(path.join(dir, 'hub', 'models--Qwen--Qwen3-8B', 'refs'));
      fs.writeFileSync(path.join(dir, 'hub', 'models--Qwen--Qwen3-8B', 'refs', 'main'), 'abc123\n');
      fs.copyFileSync(path.join(qwen3ModelDir(), 'tokenizer.json'), path.join(snapshot, 'tokenizer.json'));
      expect(chooseTokenizer('Qwen/Qwen3-8B', undefined, { HF_HOME: dir })).toMatchObject({ location: snapshot, note: null });
      expect(chooseTokenizer('Qwen/Qwen3-8B', dir)).toMatchObject({ location: dir, note: null });
      // The identity changes with the files' content: a new template is measured again.
      const before = chooseTokenizer(dir).id;
      fs.writeFileSync(path.join(dir, 'chat_template.jinja'), '{{ messages }}');
      expect(chooseTokenizer(dir).id).not.toBe(before);
    } finally {
      removeTree(dir);
    }
  });

  it('counts the longest task prompt with the same tokenizer', () => {
    expect(longestTaskPrompt('bundled:qwen3', [])).toBe(0);
    expect(longestTaskPrompt('bundled:qwen3', ['hi', 'a much longer task prompt than the other'])).toBeGreaterThan(longestTaskPrompt('bundled:qwen3', ['hi']));
  });
});

describe('two samples of one task must render one first prompt', () => {
  const a = ['# Environment', ' - Primary working directory: /tmp/out/workspaces/t-0-a1', ' - Platform: linux', "Today's date is 2026-11-27."].join('\n');
  const b = a.replace('t-0-a1', 't-1-a1');

  it('finds nothing between equal renders', () => {
    expect(firstDifference(a, a)).toBeNull();
    expect(splitProblem(measured, 'bwrap')).toBeNull();
  });

  it('shows the line where two renders part, with its neighbours, as a unified excerpt', () => {
    expect(firstDifference(a, b)).toBe(
      [
        '--- sample 1',
        '+++ sample 2',
        '@@ line 2 @@',
        ' # Environment',
        '- - Primary working directory: /tmp/out/workspaces/t-0-a1',
        '+ - Primary working directory: /tmp/out/workspaces/t-1-a1',
        '  - Platform: linux',
        " Today's date is 2026-11-27.",
      ].join('\n'),
    );
  });

  it('keeps a huge render short: long lines are clipped and long runs of changed lines counted', () => {
    const long = `${'x'.repeat(1000)}A`;
    const many = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
    const d = firstDifference(`${long}\n${many}`, `${long.replace('A', 'B')}\n${many.replace(/line/g, 'LINE')}`)!;
    expect(d.length).toBeLessThan(2000);
    expect(d).toMatch(/… \(1001 chars\)/);
    expect(d).toMatch(/… \(15 more lines\)/);
  });

  it('refuses a run whose probe rendered two first prompts, naming the difference and the fix for the sandbox in use', () => {
    const split = { ...measured, difference: firstDifference(a, b) };
    const none = splitProblem(split, 'none')!;
    expect(none).toMatch(/^claude-code 2\.1\.0 rendered a different first prompt for two samples of one task/);
    expect(none).toContain('+ - Primary working directory: /tmp/out/workspaces/t-1-a1');
    expect(none).toMatch(/drop --sandbox none/);
    expect(splitProblem(split, 'bwrap')).toMatch(/keep it out of what the harness reads at start/);
  });
});

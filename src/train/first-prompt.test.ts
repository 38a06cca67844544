import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { qwen3ModelDir } from '../core/bundled-tokenizer.js';
import { budgetProblem, chooseTokenizer, DEFAULT_SESSION_TOKENS, longestTaskPrompt, neededSeqLen, type FirstPrompt } from './first-prompt.js';

const measured: FirstPrompt = {
  harness: 'claude-code',
  version: '2.1.0',
  tokenizer: 'bundled:qwen3',
  tokens: 11_600,
  tools: 12,
  mockTokens: 11_600,
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
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('counts the longest task prompt with the same tokenizer', () => {
    expect(longestTaskPrompt('bundled:qwen3', [])).toBe(0);
    expect(longestTaskPrompt('bundled:qwen3', ['hi', 'a much longer task prompt than the other'])).toBeGreaterThan(longestTaskPrompt('bundled:qwen3', ['hi']));
  });
});

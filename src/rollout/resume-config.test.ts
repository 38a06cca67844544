import { describe, expect, it } from 'vitest';
import type { RolloutConfig } from './config.js';
import { resumedConfig } from './resume-config.js';

const stored = {
  harness: 'claude-code',
  upstream: { url: 'http://gpu:8000', kind: 'vllm-tito', tokenizer: '/models/qwen3', toolParser: 'hermes' },
  model: 'Qwen/Qwen3-8B',
  samples: 4,
  concurrency: 2,
} as unknown as RolloutConfig;

describe('resumedConfig', () => {
  it('a new URL changes only the URL: the kind, tokenizer, tool parser and model stay', () => {
    const config = resumedConfig(stored, { upstream: { url: 'http://gpu:9000' } });
    expect(config.upstream).toEqual({ url: 'http://gpu:9000', kind: 'vllm-tito', tokenizer: '/models/qwen3', toolParser: 'hermes' });
    expect(config.model).toBe('Qwen/Qwen3-8B');
  });

  it('each flag given changes its own field; no flags keep the stored configuration', () => {
    expect(resumedConfig(stored, { upstream: { tokenizer: '/models/other' }, model: 'other', concurrency: 8 })).toMatchObject({
      upstream: { url: 'http://gpu:8000', kind: 'vllm-tito', tokenizer: '/models/other' },
      model: 'other',
      concurrency: 8,
    });
    expect(resumedConfig(stored)).toEqual(stored);
    // The stored row is not changed in place.
    expect(stored.upstream.url).toBe('http://gpu:8000');
  });

  it('refuses a new sampling pair: the samples that ran were sampled with the stored one, and a group must not mix two', () => {
    expect(() => resumedConfig(stored, { upstream: { temperature: 0.6 } })).toThrow(/--temperature 0.6 differs from the rollout's 1/);
    expect(() => resumedConfig({ ...stored, upstream: { ...stored.upstream, topP: 0.95 } }, { upstream: { topP: 1 } })).toThrow(/--top-p 1 differs/);
    // Given again with the stored value, it changes nothing.
    expect(resumedConfig(stored, { upstream: { temperature: 1 } }).upstream).toMatchObject({ temperature: 1 });
  });

  it('refuses a new thinking switch: it chose the prompt every sample so far was conditioned on', () => {
    expect(() => resumedConfig(stored, { upstream: { thinking: 'off' } })).toThrow(/--thinking off differs from the rollout's template/);
    expect(() => resumedConfig({ ...stored, upstream: { ...stored.upstream, thinking: 'on' } }, { upstream: { thinking: 'template' } })).toThrow(
      /--thinking template differs from the rollout's on/,
    );
    expect(resumedConfig(stored, { upstream: { thinking: 'template' } }).upstream).toMatchObject({ thinking: 'template' });
  });
});

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseYaml, toYaml, type Yaml } from './yaml.js';

const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/yaml');

describe('yaml', () => {
  it('reads the config NeMo Gym hands an agent (a PyYAML block dump): folded and quoted scalars, nested sequences, empty collections', () => {
    const yaml = fs.readFileSync(path.join(FIXTURES, 'gym-config.yaml'), 'utf8');
    const json = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'gym-config.json'), 'utf8'));
    expect(parseYaml(yaml)).toEqual(json);
  });

  it('writes what it reads back, with strings that look like other types quoted', () => {
    const value: Yaml = {
      defaults: '/opt/nemo-rl/examples/configs/grpo_math_1B.yaml',
      grpo: { num_prompts_per_step: 2, max_val_samples: null, val_at_start: false, ratio: 0.25 },
      policy: { model_name: 'Qwen/Qwen3-0.6B', generation: { vllm_cfg: { async_engine: true, http_server_serving_chat_kwargs: { tool_parser: 'hermes' } } } },
      env: { nemo_gym: { config_paths: ['responses_api_models/vllm_model/configs/vllm_model_for_training.yaml', '/run/gym/polar_agent.yaml'] } },
      tricky: ['yes', 'null', '0123', '1e5', '- dash', 'a: b', 'x #y', '', ' padded', 'multi\nline', '${policy.model_name}', 'café'],
      empty: { list: [], map: {} },
      nested: [[1, 2], [{ a: 1, b: [true] }]],
    };
    const text = toYaml(value);
    expect(parseYaml(text)).toEqual(value);
    expect(text).toContain("tool_parser: hermes\n");
    expect(text).toContain('- "yes"\n');
    expect(text).toContain('max_val_samples: null\n');
  });

  it('block scalars and comments', () => {
    expect(parseYaml('a: |\n  one\n  two\nb: >-\n  folded\n  text\nc: 1 # note\n# a comment\nd: "x # not a comment"\n')).toEqual({ a: 'one\ntwo\n', b: 'folded text', c: 1, d: 'x # not a comment' });
  });

  it('refuses what it does not understand, with the line', () => {
    expect(() => parseYaml('a: &anchor 1\nb: *anchor\n')).toThrow(/line 1: anchors/);
    expect(() => parseYaml('a: "open\n')).toThrow(/unterminated/);
  });
});

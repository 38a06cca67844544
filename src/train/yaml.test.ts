import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseYaml, toYaml, type Yaml } from './yaml.js';

const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/yaml');

// Strings a careless writer would leave plain and PyYAML (YAML 1.1) or YAML 1.2 would read as something else.
const TRICKY = [
  'yes',
  'no',
  'on',
  'Off',
  'null',
  '~',
  'true',
  '0123',
  '0o17',
  '0x1F',
  '1e5',
  '1_000',
  '1:20',
  '2001-12-14',
  '.inf',
  '???',
  '- dash',
  'a: b',
  'x #y',
  '',
  ' padded',
  'multi\nline',
  '${policy.model_name}',
  'café',
  '"q"',
  "it's",
  '*star',
  '&amp',
  '!bang',
  '[x]',
  '{y}',
];

const CONFIG: Yaml = {
  defaults: 'grpo_math_1B.yaml',
  grpo: { num_prompts_per_step: 2, max_val_samples: null, val_at_start: false, ratio: 0.25 },
  policy: {
    _override_: true,
    model_name: 'Qwen/Qwen3-0.6B',
    generation: { vllm_cfg: { async_engine: true, http_server_serving_chat_kwargs: { tool_parser: 'hermes' } } },
  },
  env: { nemo_gym: { config_paths: ['responses_api_models/vllm_model/configs/vllm_model_for_training.yaml', '/run/gym/polar_agent.yaml'] } },
  tricky: TRICKY,
  yes: 'a key YAML 1.1 reads as true',
  empty: { list: [], map: {} },
  nested: [[1, 2], [{ a: 1, b: [true] }]],
  long: `${'word '.repeat(60)}end`,
};

function pyyaml(): boolean {
  return spawnSync('python3', ['-c', 'import yaml'], { stdio: 'ignore' }).status === 0;
}

describe('yaml', () => {
  it('reads the config NeMo Gym hands an agent (a PyYAML block dump): folded and quoted scalars, nested sequences, empty collections', () => {
    const yaml = fs.readFileSync(path.join(FIXTURES, 'gym-config.yaml'), 'utf8');
    const json = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'gym-config.json'), 'utf8'));
    expect(parseYaml(yaml)).toEqual(json);
  });

  it('writes what it reads back, keys in order, strings that look like other types quoted', () => {
    const text = toYaml(CONFIG);
    expect(parseYaml(text)).toEqual(CONFIG);
    expect(Object.keys(parseYaml(text) as object)).toEqual(Object.keys(CONFIG as object));
    expect(text.startsWith('defaults: grpo_math_1B.yaml\n')).toBe(true);
    expect(text).toContain('tool_parser: hermes\n');
    expect(text).toContain('max_val_samples: null\n');
    expect(text).toContain('_override_: true\n');
    for (const s of ['yes', 'on', 'Off', '0123', '1e5', '1:20', '2001-12-14']) expect(text).toContain(`- "${s}"\n`);
    expect(text).toContain('"yes": a key');
    expect(text).toContain(`long: ${'word '.repeat(60)}end\n`); // not folded over lines
  });

  it('writes an object that appears twice in full, with no anchor', () => {
    const shared = { a: 1 };
    const text = toYaml({ u: shared, v: shared });
    expect(text).toBe('u:\n  a: 1\nv:\n  a: 1\n');
  });

  it.skipIf(!pyyaml())('PyYAML, which NeMo-RL and OmegaConf read with, reads back what polar writes (skipped: python3 has no yaml module)', () => {
    const read = spawnSync('python3', ['-c', 'import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))'], {
      input: toYaml(CONFIG),
      encoding: 'utf8',
    });
    expect(read.stderr).toBe('');
    expect(JSON.parse(read.stdout)).toEqual(CONFIG);
  });

  it('block scalars, comments, anchors', () => {
    expect(parseYaml('a: |\n  one\n  two\nb: >-\n  folded\n  text\nc: 1 # note\n# a comment\nd: "x # not a comment"\n')).toEqual({
      a: 'one\ntwo\n',
      b: 'folded text',
      c: 1,
      d: 'x # not a comment',
    });
    // NeMo-RL's distillation configs share sections this way; PyYAML and OmegaConf accept it.
    expect(parseYaml('base: &opt {lr: 1.0e-6}\nteacher: *opt\n')).toEqual({ base: { lr: 1e-6 }, teacher: { lr: 1e-6 } });
  });

  it('refuses what OmegaConf would refuse too, naming the line', () => {
    expect(() => parseYaml('a: 1\nb: [1, 2\nc: 3\n')).toThrow(/at line \d+, column \d+/);
    expect(() => parseYaml('a: 1\nb: 2\na: 3\n')).toThrow(/unique/);
    expect(() => parseYaml('a: 1\n---\nb: 2\n')).toThrow(/multiple documents/);
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qwen3ModelDir } from '../../src/core/bundled-tokenizer.js';
import { getKey } from '../../src/train/nemo-rl/config.js';
import { parseYaml } from '../../src/train/yaml.js';
import { trainGrpoArgs, writeBareCheckout, writeTaskFile } from '../support/nemo-rl-train.js';
import { polarCli } from '../support/polar-cli.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The context budget of `polar train grpo`: preflight runs the real harness (Claude Code, a
 * devDependency) once against polar's mock server, counts its first prompt with the policy's chat
 * template, and refuses a sequence length that cannot hold it plus a useful session. NeMo-RL's vLLM
 * server answers 400 to a prompt that fills max_model_len (vllm_worker_async.py:438-447 at 7ea279a),
 * so below that every sample would be masked.
 */
let dir: string;
let checkout: string;
let tasks: string;
let env: NodeJS.ProcessEnv;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-train-context-'));
  checkout = writeBareCheckout(path.join(dir, 'RL'));
  tasks = writeTaskFile(
    path.join(dir, 'tasks.jsonl'),
    ['a', 'b'].map((id) => ({ id, prompt: `write ${id}.txt`, workspace: { empty: true }, evaluator: { type: 'command', command: 'echo 1' } })),
  );
  // The measurement cache lives in polar's state dir: a fresh one, so the first run measures.
  // …and an empty Hugging Face cache, so a hub id is counted with the bundled Qwen3 tokenizer.
  env = { ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'state'), HF_HUB_CACHE: path.join(dir, 'hub'), PATH: `/usr/bin:/bin` };
});
afterAll(() => removeTree(dir));

interface DryRun {
  ok: boolean;
  errors: string[];
  warnings: string[];
  firstPrompt?: { harness: string; version: string; tokenizer: string; tokens: number; tools: number; mockTokens: number | null; cached: boolean };
}

async function dryRun(name: string, extra: string[], model = 'Qwen/Qwen3-0.6B'): Promise<{ code: number; result: DryRun }> {
  const args = trainGrpoArgs({
    checkout,
    model,
    tasks,
    harness: ['--harness', 'claude-code'],
    // In the sandbox the agent would use: unsandboxed, Claude Code's first prompt names each sample's
    // own workspace, and the preflight refuses that (first-prompt-probe.ts).
    sandbox: [],
    runDir: path.join(dir, name),
    db: path.join(dir, `${name}.db`),
    extra: ['--dry-run', '--json', ...extra],
  });
  const r = await polarCli(args, { env, timeout: patient(120_000) });
  if (r.code !== 0 && !r.stdout) throw new Error(`polar train failed without output: ${r.stderr}`);
  return { code: r.code, result: JSON.parse(r.stdout) as DryRun };
}

describe('polar train grpo: the context budget', () => {
  it('refuses Claude Code with --max-seq-len 8192, naming its measured first prompt and a size that fits; that size passes, from the cache', {
    timeout: patient(240_000),
  }, async () => {
    const small = await dryRun('cc-8192', ['--max-seq-len', '8192']);
    expect(small.code).toBe(2);
    const m = small.result.firstPrompt!;
    expect(m).toMatchObject({ harness: 'claude-code', tokenizer: 'bundled:qwen3', cached: false });
    expect(m.version).toMatch(/^\d+\.\d+\.\d+/);
    // Its system prompt and tools: about 11.6k Qwen3 tokens at 2.1.x; a range, as releases move it.
    expect(m.tokens).toBeGreaterThan(8192);
    expect(m.tokens).toBeLessThan(40_000);
    expect(m.tools).toBeGreaterThan(3);
    // polar's own rendering of what it sent upstream agrees with the mock's server-side rendering.
    expect(m.mockTokens).toBe(m.tokens);
    const refusal = small.result.errors.find((e) => e.startsWith('--max-seq-len 8192 is too small'));
    expect(refusal).toContain(`its first prompt is ${m.tokens} tokens`);
    expect(refusal).toContain('first prompt alone does not fit');
    const suggested = Number(/Use --max-seq-len (\d+) or more/.exec(refusal!)?.[1]);
    expect(suggested % 1024).toBe(0);
    expect(suggested).toBeGreaterThanOrEqual(m.tokens + 8192);
    expect(small.result.warnings.some((w) => w.includes("polar's bundled Qwen3 tokenizer"))).toBe(true);

    const fits = await dryRun('cc-fits', ['--max-seq-len', String(suggested)]);
    expect(fits.result.errors).toEqual([]);
    expect(fits.code).toBe(0);
    expect(fits.result.firstPrompt).toMatchObject({ tokens: m.tokens, cached: true });

    // Room for the first prompt but not for a session: refused too, saying what is left.
    const tight = await dryRun('cc-tight', ['--max-seq-len', String(m.tokens + 1000)]);
    expect(tight.result.errors.join('\n')).toMatch(/leaves \d+ tokens for the whole session after the first prompt/);
    // --set reaches vLLM's max_model_len: checked as the config will run.
    const set = await dryRun('cc-set', ['--max-seq-len', String(suggested), '--set', 'policy.generation.vllm_cfg.max_model_len=8192']);
    expect(set.result.errors.join('\n')).toMatch(/--max-seq-len 8192 is too small/);
  });

  it('left at its default, the sequence length grows to fit; a local model folder is counted with its own template', {
    timeout: patient(240_000),
  }, async () => {
    const auto = await dryRun('cc-default', []);
    expect(auto.result.errors).toEqual([]);
    const config = parseYaml(fs.readFileSync(path.join(dir, 'cc-default', 'grpo.yaml'), 'utf8'));
    const len = getKey(config, 'policy.generation.vllm_cfg.max_model_len') as number;
    expect(len).toBeGreaterThanOrEqual(auto.result.firstPrompt!.tokens + 8192);
    expect(getKey(config, 'policy.max_total_sequence_length')).toBe(len);
    // The agent is told the window (NeMo-RL's server lists no models): harnesses size output and compaction by it.
    expect(fs.readFileSync(path.join(dir, 'cc-default', 'gym/responses_api_agents/polar_agent/app.py'), 'utf8')).toContain(`"--context-window","${len}"`);

    // A model folder with its tokenizer (here a copy of Qwen3's, so the count must agree).
    const model = path.join(dir, 'model');
    fs.cpSync(qwen3ModelDir(), model, { recursive: true });
    fs.writeFileSync(path.join(model, 'config.json'), '{}');
    const local = await dryRun('cc-local', ['--max-seq-len', String(len)], model);
    expect(local.result.firstPrompt).toMatchObject({ tokenizer: model, cached: false });
    // The same template, so the same count but for the few tokens of the prompt that vary by run (paths).
    expect(local.result.firstPrompt!.mockTokens).toBe(local.result.firstPrompt!.tokens);
    expect(Math.abs(local.result.firstPrompt!.tokens - auto.result.firstPrompt!.tokens)).toBeLessThan(64);
    expect(local.result.warnings.some((w) => w.includes('bundled Qwen3'))).toBe(false);
  });
});

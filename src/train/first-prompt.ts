import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { qwen3ModelDir } from '../core/bundled-tokenizer.js';
import { getHarness } from '../harness/registry.js';
import { resolveHarnessBin } from '../harness/resolve.js';
import type { Harness } from '../harness/types.js';
import { stateDir } from '../store/postgres/url.js';
import { BUNDLED_QWEN3, loadChatTemplate } from '../upstream/tito/chat-template.js';
import { probeFirstPrompts, probeInsidePaths } from './first-prompt-probe.js';

/**
 * How many tokens a harness's first model call takes before the task says anything: its system
 * prompt and tool definitions, rendered with the policy's chat template. NeMo-RL's vLLM server
 * answers 400 to a prompt that fills `max_model_len` (vllm_worker_async.py:438-447, :777-790 at
 * 7ea279a), and polar answers such a sample masked, so a `--max-seq-len` below this trains nothing.
 *
 * Measured, not estimated: the real harness runs against polar's mock server (which answers its
 * first call with a final text, so the session ends there), and the first call that offers tools, as
 * polar sent it upstream, is rendered with the template. It runs twice, as two samples of one task in
 * the agent's sandbox (first-prompt-probe.ts): renders that differ would split every GRPO group.
 * Harnesses differ by thousands of tokens and change with every release, so the result is cached per
 * harness, version, tokenizer and sandbox.
 */
export interface FirstPrompt {
  harness: string;
  /** The harness's version (its package.json), or a fingerprint of its binary or command. */
  version: string;
  /** The tokenizer and template used: a folder, or `bundled:qwen3`. */
  tokenizer: string;
  /** Tokens of the first call's prompt (with the generation prompt), the probe task's text included. */
  tokens: number;
  /** Tools the first call offered. */
  tools: number;
  /** The same prompt as the mock server counted it (bundled Qwen3, rendered server-side as vLLM does). */
  mockTokens: number | null;
  /** Where two samples' rendered first prompts part (a short unified excerpt), or null when they are one. */
  difference: string | null;
  /** Why this tokenizer was used, where it is not the model's own. */
  note: string | null;
  /** True when this came from the cache. */
  cached: boolean;
}

export interface MeasureInput {
  harness: string;
  command?: string;
  harnessBin?: string;
  nodeBin?: string;
  /** `--model`: a local folder with a tokenizer is measured with its own template. */
  model: string;
  /** `--tokenizer` when given: it wins over the model folder. */
  tokenizer?: string;
  /** Where the cache lives (default: polar's state dir). */
  cacheDir?: string;
  /** The sandbox the agent runs samples in (default bwrap): the probe's two samples run in the same. */
  sandbox?: 'bwrap' | 'none';
  /** The task file's folder the agent's evaluators mount (it decides the fixed in-sandbox paths). */
  tasksDir?: string;
  timeoutSec?: number;
  onNotice?: (line: string) => void;
}

/** The task text of the probe: short, so the count is the harness's own share. */
export const PROBE_PROMPT = 'Reply with the word done.';

const CACHE_FILE = 'first-prompt.json';
/**
 * Part of every cache key: entries written before the probe compared two samples (1), or before it
 * ran the harness append-only as the agent does (2), are not reused.
 */
const PROBE_VERSION = 3;
const CACHE_ENTRIES = 64;

export async function measureFirstPrompt(input: MeasureInput): Promise<FirstPrompt> {
  const harness = getHarness(input.harness, input.command !== undefined ? { command: input.command } : {});
  const { location, id: tokenizerId, note } = chooseTokenizer(input.model, input.tokenizer);
  const bin = await resolveHarnessBin(harness, input.harnessBin, process.cwd());
  const version = harnessFingerprint(harness, bin, input.command);
  const sandbox = input.sandbox ?? 'bwrap';
  const inside = probeInsidePaths(sandbox, bin, input.nodeBin, input.tasksDir);
  const key = `${harness.name}|${version}|${tokenizerId}|${sandbox}|${inside ? `${inside.workspace}:${inside.home}` : 'host'}|v${PROBE_VERSION}`;
  const cacheFile = path.join(input.cacheDir ?? stateDir(), CACHE_FILE);
  const hit = readCache(cacheFile)[key];
  if (hit) return { ...hit, note, cached: true };

  const template = loadChatTemplate(location, qwen3ModelDir);
  const measured = await probeFirstPrompts(harness, bin, template, {
    prompt: PROBE_PROMPT,
    sandbox,
    ...(input.tasksDir ? { tasksDir: input.tasksDir } : {}),
    ...(input.nodeBin ? { nodeBin: input.nodeBin } : {}),
    ...(input.timeoutSec ? { timeoutSec: input.timeoutSec } : {}),
    ...(input.onNotice ? { onNotice: input.onNotice } : {}),
  });
  const result: FirstPrompt = {
    harness: harness.name,
    version,
    tokenizer: location,
    tokens: measured.tokens,
    tools: measured.tools,
    mockTokens: measured.mockTokens,
    difference: measured.difference,
    note,
    cached: false,
  };
  writeCache(cacheFile, key, result);
  return result;
}

/**
 * The tokenizer to count with: `--tokenizer`, else `--model` when it is a local folder with a
 * tokenizer, or a hub id already in the Hugging Face cache, else the bundled Qwen3 one (nothing is
 * downloaded for a preflight), with a note.
 */
export function chooseTokenizer(
  model: string,
  tokenizer?: string,
  env: NodeJS.ProcessEnv = process.env,
): { location: string; id: string; note: string | null } {
  if (tokenizer && tokenizer !== BUNDLED_QWEN3) return { location: tokenizer, id: folderId(tokenizer), note: null };
  const dir = model.startsWith('~') ? path.join(os.homedir(), model.slice(1)) : path.resolve(model);
  if (!tokenizer && fs.existsSync(path.join(dir, 'tokenizer.json'))) return { location: dir, id: folderId(dir), note: null };
  const cached = tokenizer ? null : hubSnapshot(model, env);
  if (cached) return { location: cached, id: folderId(cached), note: null };
  return {
    location: BUNDLED_QWEN3,
    id: BUNDLED_QWEN3,
    note: tokenizer
      ? null
      : `counted with polar's bundled Qwen3 tokenizer and template: --model ${model} is neither a local folder with a tokenizer nor in the Hugging Face cache (pass a folder, or --tokenizer, to count with the model's own)`,
  };
}

/**
 * The smallest `--max-seq-len` that holds the first prompt, the longest task's own text, and a
 * useful session after them, rounded up to a multiple of 1024.
 */
export function neededSeqLen(firstPrompt: number, taskPromptTokens: number, sessionTokens: number): number {
  return Math.ceil((firstPrompt + taskPromptTokens + sessionTokens) / 1024) * 1024;
}

/** A useful session by default: 8 turns of 1024 tokens (the model's reply and the tool's output). */
export const SESSION_TURNS = 8;
export const TURN_TOKENS = 1024;
export const DEFAULT_SESSION_TOKENS = SESSION_TURNS * TURN_TOKENS;

/** The refusal, or null when `maxSeqLen` holds the first prompt plus a useful session. */
export function budgetProblem(m: FirstPrompt, taskPromptTokens: number, maxSeqLen: number, sessionTokens: number): string | null {
  const need = neededSeqLen(m.tokens, taskPromptTokens, sessionTokens);
  if (maxSeqLen >= m.tokens + taskPromptTokens + sessionTokens) return null;
  const left = maxSeqLen - m.tokens - taskPromptTokens;
  const what =
    left <= 0
      ? `its first prompt alone does not fit, so NeMo-RL's vLLM server answers every call 400 and every sample is masked (trains nothing)`
      : `that leaves ${left} tokens for the whole session after the first prompt, less than a useful one (${sessionTokens} tokens: ${sessionTokens === DEFAULT_SESSION_TOKENS ? `${SESSION_TURNS} turns of ${TURN_TOKENS}` : '--session-tokens'}); a session that outgrows it is cut and masked`;
  return `--max-seq-len ${maxSeqLen} is too small for ${m.harness} ${m.version}: its first prompt is ${m.tokens} tokens (system prompt and ${m.tools} tools, ${path.basename(m.tokenizer)} template)${taskPromptTokens > 0 ? ` plus up to ${taskPromptTokens} of task text` : ''}; ${what}. Use --max-seq-len ${need} or more`;
}

/**
 * The refusal when two samples of one task rendered different first prompts (the probe's
 * `difference`), or null: NeMo-RL groups GRPO samples by their first prompt's token ids
 * (nemo_gym.py:1012, algorithms/utils.py:132-159 at 7ea279a), so such a run learns nothing.
 */
export function splitProblem(m: FirstPrompt, sandbox: 'bwrap' | 'none'): string | null {
  if (m.difference === null) return null;
  const fix =
    sandbox === 'none'
      ? 'run in the bwrap sandbox (drop --sandbox none): it gives every sample the same workspace and home paths'
      : "the harness puts something of its own run in it (a path, a date, an id): keep it out of what the harness reads at start (a custom harness's command, the task's files), or report it as a polar bug";
  const excerpt = m.difference
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');
  return `${m.harness} ${m.version} rendered a different first prompt for two samples of one task, so NeMo-RL would make each sample its own GRPO group (advantage 0: nothing is learned). Where they part:\n${excerpt}\n  Fix: ${fix}`;
}

/** Tokens of the longest task prompt, with the same tokenizer. */
export function longestTaskPrompt(location: string, prompts: readonly string[]): number {
  if (prompts.length === 0) return 0;
  const template = loadChatTemplate(location, qwen3ModelDir);
  return Math.max(...prompts.map((p) => template.encode(p).length));
}

/** A hub id's snapshot in the Hugging Face cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`), when it has a tokenizer. */
export function hubSnapshot(model: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (!/^[\w.-]+\/[\w.-]+$/.test(model)) return null;
  const hub = env.HF_HUB_CACHE ?? path.join(env.HF_HOME ?? path.join(os.homedir(), '.cache', 'huggingface'), 'hub');
  const repo = path.join(hub, `models--${model.replace('/', '--')}`);
  try {
    const main = path.join(repo, 'refs', 'main');
    const snapshots = fs.existsSync(main) ? [fs.readFileSync(main, 'utf8').trim()] : fs.readdirSync(path.join(repo, 'snapshots'));
    for (const s of snapshots) {
      const dir = path.join(repo, 'snapshots', s);
      if (fs.existsSync(path.join(dir, 'tokenizer.json'))) return dir;
    }
  } catch {
    // Not in the cache.
  }
  return null;
}

/**
 * What a measurement is valid for: the version in the harness package's package.json (found from its
 * binary), else the binary's size and time; for the custom harness, its command.
 */
function harnessFingerprint(harness: Harness, bin: string, command: string | undefined): string {
  if (command !== undefined) return `command-${hash(command)}`;
  let real = bin;
  try {
    real = fs.realpathSync(bin);
  } catch {
    // A dangling link: fingerprinted by its path below.
  }
  for (let dir = path.dirname(real); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (!fs.existsSync(file)) continue;
    try {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === harness.packageName && pkg.version) return pkg.version;
    } catch {
      // Not JSON: keep walking.
    }
  }
  const stat = fs.statSync(real, { throwIfNoEntry: false });
  return `bin-${hash(`${real}|${stat?.size ?? 0}|${stat?.mtimeMs ?? 0}`)}`;
}

/** A tokenizer folder's identity: its template and tokenizer files' content. */
function folderId(location: string): string {
  const stat = fs.statSync(location, { throwIfNoEntry: false });
  const dir = stat?.isDirectory() ? location : path.dirname(location);
  const h = createHash('sha256');
  for (const f of ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja']) {
    const file = path.join(dir, f);
    if (fs.existsSync(file)) h.update(f).update(fs.readFileSync(file));
  }
  return `${path.resolve(location)}#${h.digest('hex').slice(0, 16)}`;
}

function hash(s: string): string {
  return createHash('sha256').update(s).digest('hex').slice(0, 16);
}

type Cache = Record<string, Omit<FirstPrompt, 'note' | 'cached'>>;

function readCache(file: string): Cache {
  try {
    const value = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Cache) : {};
  } catch {
    return {};
  }
}

function writeCache(file: string, key: string, m: FirstPrompt): void {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const { note: _note, cached: _cached, ...kept } = m;
    const old = readCache(file);
    delete old[key];
    // Newest last; a bounded file (custom harness commands each make a key of their own).
    const next = Object.fromEntries([...Object.entries(old).slice(-(CACHE_ENTRIES - 1)), [key, kept]]);
    // Written whole and renamed: a preflight running beside this one reads either version, never half.
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${JSON.stringify(next, null, 2)}\n`);
    fs.renameSync(tmp, file);
  } catch {
    // A cache that cannot be written only makes the next preflight measure again.
  }
}

import fs from 'node:fs';
import path from 'node:path';
import { qwen3ModelDir } from '../core/bundled-tokenizer.js';
import { loadChatTemplate, type ChatTemplate, type TemplateMessage } from '../upstream/tito/chat-template.js';
import { chooseTokenizer } from './first-prompt.js';
import { getKey } from './nemo-rl/config.js';
import type { Yaml } from './yaml.js';

/**
 * How long each SFT example is to NeMo-RL, so none is dropped in silence. NeMo-RL's `sft_processor`
 * gives an example of `length >= max_seq_length` a loss_multiplier of 0 and cuts it to a few tokens
 * (nemo_rl/data/processors.py:171-178 at 7ea279a; max_seq_length is data.max_input_seq_length,
 * examples/run_sft.py:99): it stays in the batch and trains nothing, and Claude Code's first prompt
 * alone is ~11.8k of the default 16384.
 *
 * The count is NeMo-RL's: `get_formatted_message_log` (nemo_rl/data/llm_message_utils.py:546-640)
 * renders messages[:i+1] with the model's chat template for each i (the tools given each time; the
 * generation prompt only after a user or tool message, and only with data.add_generation_prompt),
 * takes what the render added since the previous one (from the first character that differs,
 * :457-462), adds bos to the first chunk and eos to the last where the template did not (data.add_bos
 * / add_eos, :583-612), tokenizes each chunk on its own, and sums them (processors.py:169). Rendering
 * each prefix, not the whole conversation once, matters: a template such as Qwen3's drops the
 * reasoning of earlier turns from a whole render but keeps it in the prefix that ends with that turn.
 * polar's renderer parses tool-call arguments given as JSON strings (as vLLM does, chat-template.ts),
 * where Hugging Face's pastes the string: a call's count may differ by a few tokens.
 */
export interface SftRender {
  addBos: boolean;
  addEos: boolean;
  addGenerationPrompt: boolean;
}

export interface SftExampleLength {
  /** 1-based line of the data file. */
  line: number;
  tokens: number;
}

export interface SftLengths {
  /** The tokenizer and template counted with: a folder, or `bundled:qwen3`. */
  tokenizer: string;
  /** Why that is not the model's own, where it is not. */
  note: string | null;
  examples: SftExampleLength[];
}

/** Tokens of one example as NeMo-RL's SFT processor counts them (see above). */
export function exampleTokens(template: ChatTemplate, messages: readonly TemplateMessage[], tools: readonly unknown[] | undefined, r: SftRender): number {
  let previous = '';
  let total = 0;
  messages.forEach((message, i) => {
    const rendered = template.render(messages.slice(0, i + 1), {
      ...(tools ? { tools } : {}),
      addGenerationPrompt: r.addGenerationPrompt && (message.role === 'user' || message.role === 'tool'),
    });
    let chunk = rendered.slice(firstDifference(previous, rendered));
    if (i === 0 && r.addBos && template.bosToken && !chunk.startsWith(template.bosToken)) chunk = template.bosToken + chunk;
    if (i === messages.length - 1 && r.addEos && template.eosToken && !chunk.replace(/\n+$/, '').endsWith(template.eosToken)) chunk += template.eosToken;
    total += template.encode(chunk).length;
    previous = rendered;
  });
  return total;
}

function firstDifference(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

/**
 * Every example of an openai_format file (`{messages, tools}` per line), counted with the model's
 * tokenizer and template where polar can read them (a local folder, or the Hugging Face cache; else
 * the bundled Qwen3 ones, with a note). A line that is not an example is left to NeMo-RL's own check.
 */
export function sftExampleLengths(data: string, model: string, r: SftRender, env: NodeJS.ProcessEnv = process.env): SftLengths {
  const { location, note } = chooseTokenizer(model, undefined, env);
  const template = loadChatTemplate(location, qwen3ModelDir);
  const examples: SftExampleLength[] = [];
  fs.readFileSync(data, 'utf8')
    .split('\n')
    .forEach((text, i) => {
      if (text.trim() === '') return;
      let row: { messages?: unknown; tools?: unknown };
      try {
        row = JSON.parse(text) as { messages?: unknown; tools?: unknown };
      } catch {
        return;
      }
      if (!Array.isArray(row.messages) || row.messages.length === 0) return;
      const tools = Array.isArray(row.tools) ? row.tools : undefined;
      examples.push({ line: i + 1, tokens: exampleTokens(template, row.messages as TemplateMessage[], tools, r) });
    });
  return { tokenizer: location, note, examples };
}

/** The smallest sequence length that keeps every example in the loss: longer than the longest, rounded up to 1024. */
export function sftNeededSeqLen(lengths: SftLengths): number {
  const longest = Math.max(0, ...lengths.examples.map((e) => e.tokens));
  return Math.ceil((longest + 1) / 1024) * 1024;
}

/** The examples NeMo-RL would drop at this length (`length >= max_seq_length`), longest first. */
export function droppedExamples(lengths: SftLengths, maxSeqLen: number): SftExampleLength[] {
  return lengths.examples.filter((e) => e.tokens >= maxSeqLen).sort((a, b) => b.tokens - a.tokens);
}

/** The refusal for a length the user chose, naming the examples and the length that holds them all. */
export function sftLengthProblem(lengths: SftLengths, maxSeqLen: number, data: string): string | null {
  const dropped = droppedExamples(lengths, maxSeqLen);
  if (dropped.length === 0) return null;
  const shown = dropped
    .slice(0, 5)
    .map((e) => `line ${e.line} (${e.tokens} tokens)`)
    .join(', ');
  return `${dropped.length} of ${lengths.examples.length} SFT examples in ${path.basename(data)} are ${maxSeqLen} tokens or longer (${path.basename(lengths.tokenizer)} template): ${shown}${dropped.length > 5 ? ', …' : ''}. NeMo-RL keeps such an example with loss_multiplier 0, cut short (data/processors.py:171-178): it trains nothing. Use --max-seq-len ${sftNeededSeqLen(lengths)} or more, or leave those examples out`;
}

/** What a run's SFT data measured, or why it could not be (null: no data file to read). */
export type SftSizing = { lengths: SftLengths } | { failed: string } | null;

/** The render switches the config gives NeMo-RL's SFT processor (data.add_bos / add_eos / add_generation_prompt, run_sft.py:84-86). */
export function sftRender(config: Yaml): SftRender {
  const flag = (key: string, fallback: boolean) => {
    const v = getKey(config, key);
    return typeof v === 'boolean' ? v : fallback;
  };
  return { addBos: flag('data.add_bos', true), addEos: flag('data.add_eos', true), addGenerationPrompt: flag('data.add_generation_prompt', false) };
}

export function sizeSftData(data: string, model: string, config: Yaml, env: NodeJS.ProcessEnv): SftSizing {
  if (!fs.existsSync(data)) return null;
  try {
    return { lengths: sftExampleLengths(data, model, sftRender(config), env) };
  } catch (err) {
    return {
      failed: `could not size the SFT examples with ${model}'s chat template, so NeMo-RL may drop long ones from the loss unseen: ${(err as Error).message}`,
    };
  }
}

/**
 * Preflight's part, against the config as it will run: the length NeMo-RL cuts at is
 * data.max_input_seq_length, and the policy takes no longer sequence than max_total_sequence_length.
 * `raisedFrom`: the default polar raised (a notice); otherwise examples that do not fit are an error.
 */
export function sftLengthChecks(
  sizing: SftSizing,
  config: Yaml,
  data: string,
  raisedFrom: number | null,
  dryRun: boolean,
  checks: { errors: string[]; warnings: string[] },
): void {
  if (!sizing) return;
  if ('failed' in sizing) {
    (dryRun ? checks.warnings : checks.errors).push(sizing.failed);
    return;
  }
  const { lengths } = sizing;
  if (lengths.note) checks.warnings.push(lengths.note.replace('counted with', 'SFT examples counted with'));
  const template = getKey(config, 'policy.tokenizer.chat_template');
  if (template !== 'default' && template !== undefined)
    checks.warnings.push(
      `policy.tokenizer.chat_template is not \`default\`: the SFT examples were sized with the model's own template, which NeMo-RL will not use`,
    );
  const lens = [getKey(config, 'data.max_input_seq_length'), getKey(config, 'policy.max_total_sequence_length')].filter(
    (v): v is number => typeof v === 'number',
  );
  if (lens.length === 0) return;
  const limit = Math.min(...lens);
  if (raisedFrom !== null) {
    const longest = Math.max(...lengths.examples.map((e) => e.tokens));
    checks.warnings.push(
      `--max-seq-len raised from its default ${raisedFrom} to ${limit}: the longest of ${lengths.examples.length} SFT examples is ${longest} tokens (${path.basename(lengths.tokenizer)} template), and NeMo-RL leaves an example of the length or longer out of the loss (data/processors.py:171-178). Pass --max-seq-len to choose (examples that do not fit are then refused by name)`,
    );
  }
  const problem = sftLengthProblem(lengths, limit, data);
  if (problem) checks.errors.push(problem);
}

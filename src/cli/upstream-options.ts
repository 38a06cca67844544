import { Option, type Command } from 'commander';
import { PolarError } from '../core/errors.js';
import { TOOL_PARSERS, type UpstreamOptions } from '../upstream/create.js';
import { UPSTREAM_KINDS } from '../upstream/types.js';

export interface UpstreamFlags {
  upstreamKind: string;
  tokenizer?: string;
  toolParser?: string;
  temperature?: string;
  topP?: string;
}

/** The flags that choose and configure the inference server, shared by `proxy` and `run`. */
export function addUpstreamOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--upstream-kind <kind>', 'inference server type (see "Upstream kinds" below)').choices([...UPSTREAM_KINDS]).default('vllm'),
    )
    .option('--tokenizer <path>', 'vllm-tito / sglang-tito: the model\'s Hugging Face folder (tokenizer.json + tokenizer_config.json or chat_template.jinja), or bundled:qwen3')
    .addOption(new Option('--tool-parser <name>', 'vllm-tito / sglang-tito: tool-call format (default: detected from the chat template)').choices([...TOOL_PARSERS]))
    .option('--temperature <t>', 'nemo-rl: the training temperature NeMo-RL asserts (set on every call)')
    .option('--top-p <p>', 'nemo-rl: the training top_p NeMo-RL asserts (set on every call; default 1.0)');
}

export const UPSTREAM_KINDS_HELP = `
Upstream kinds:
  vllm         vLLM /v1/chat/completions; vLLM renders the template, polar records its token ids
  vllm-tito    vLLM /v1/completions with token ids: polar renders and bridges (needs --tokenizer);
               every turn continues the previous prompt + sampled ids byte for byte, so
               multi-turn sessions merge into one trajectory without drift
  sglang-tito  SGLang /generate with token ids: polar renders and bridges (needs --tokenizer)
  nemo-rl      NeMo-RL's vLLM HTTP server during GRPO: polar hands back earlier calls' token ids
               and the server splices them (--temperature/--top-p must match training)
  openai       any OpenAI-compatible server without token ids (recorded as text only)`;

export function upstreamOptionsFrom(flags: UpstreamFlags): Omit<UpstreamOptions, 'baseUrl'> {
  const out: Omit<UpstreamOptions, 'baseUrl'> = {};
  if (flags.tokenizer) out.tokenizer = flags.tokenizer;
  if (flags.toolParser) out.toolParser = flags.toolParser;
  if (flags.temperature !== undefined) out.temperature = number(flags.temperature, '--temperature', 0, 100);
  if (flags.topP !== undefined) out.topP = number(flags.topP, '--top-p', 0, 1);
  return out;
}

function number(value: string, flag: string, min: number, max: number): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) throw new PolarError('POLAR_USAGE', `${flag} must be a number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

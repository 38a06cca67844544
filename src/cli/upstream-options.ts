import { Option, type Command } from 'commander';
import { TOOL_PARSERS, type UpstreamOptions } from '../upstream/create.js';
import { samplingPolicy, THINKING_SETTINGS, type SamplingPolicy, type ThinkingSetting } from '../upstream/sampling-policy.js';
import { UPSTREAM_KINDS } from '../upstream/types.js';
import { numberArg } from './numbers.js';

export interface UpstreamFlags {
  upstreamKind: string;
  tokenizer?: string;
  toolParser?: string;
  temperature?: number;
  topP?: number;
  thinking?: ThinkingSetting;
}

/** The flags that choose and configure the inference server, shared by `proxy` and `run`. */
export function addUpstreamOptions(command: Command): Command {
  command
    .addOption(new Option('--upstream-kind <kind>', 'inference server type (see "Upstream kinds" below)').choices([...UPSTREAM_KINDS]).default('vllm'))
    .option(
      '--tokenizer <path>',
      "vllm-tito / sglang-tito: the model's Hugging Face folder (tokenizer.json + tokenizer_config.json or chat_template.jinja), or bundled:qwen3",
    )
    .addOption(
      new Option('--tool-parser <name>', 'vllm-tito / sglang-tito: tool-call format (default: detected from the chat template)').choices([...TOOL_PARSERS]),
    );
  return addTrainerSamplingOptions(command);
}

/**
 * `--temperature`, `--top-p` and `--thinking`: the trainer's sampling, pinned where polar pins it.
 * `temperatureHelp` says where a command takes it from when it has a source of its own (gym-agent: the row).
 */
export function addTrainerSamplingOptions(
  command: Command,
  temperatureHelp = "the trainer's sampling temperature: set on every call where polar pins sampling (rollout, worker, gym-agent, train, and any nemo-rl upstream); default 1.0, NeMo-RL's",
): Command {
  return command
    .option('--temperature <t>', temperatureHelp, numberArg('--temperature', 0, 100))
    .option('--top-p <p>', "the trainer's top_p, pinned likewise (default 1.0, NeMo-RL's)", numberArg('--top-p', 0, 1))
    .addOption(thinkingOption());
}

/**
 * `--thinking`: the chat template's thinking switch, pinned likewise (the session's own Anthropic
 * `thinking` / Responses `reasoning.effort` / Gemini `thinkingConfig` is replaced). Its default,
 * `template` (send no enable_thinking), is what NeMo-RL's own rollouts render with (sampling-policy.ts
 * TRAINER_THINKING), so it is left unset here and the policy fills it in.
 */
export function thinkingOption(): Option {
  return new Option(
    '--thinking <mode>',
    "the chat template's thinking switch where polar pins sampling: on / off send enable_thinking true / false; template sends none, the template's (or NeMo-RL server's) default, as NeMo-RL's own rollouts do (default template)",
  ).choices([...THINKING_SETTINGS]);
}

/**
 * `--sampling` for the plain-capture commands (`run`, `proxy`): pass-through by default; `trainer`
 * pins sampling as a rollout does, for a trainer of one's own behind `polar proxy`.
 */
export function addSamplingModeOption(command: Command): Command {
  return command.addOption(
    new Option(
      '--sampling <mode>',
      'pass-through: requests go as the harness sent them (calls that set their own sampling or template are flagged and kept out of exports); trainer: polar pins them (--temperature/--top-p/--thinking) and drops the rest',
    )
      .choices(['pass-through', 'trainer'])
      .default('pass-through'),
  );
}

/** The sampling policy of a plain-capture command (`run`, `proxy`). */
export function captureSampling(flags: UpstreamFlags & { sampling?: string }): SamplingPolicy {
  return samplingPolicy(flags.sampling === 'trainer' ? 'trainer' : 'pass-through', flags.upstreamKind, flags.temperature, flags.topP, flags.thinking);
}

export const UPSTREAM_KINDS_HELP = `
Upstream kinds:
  vllm         vLLM /v1/chat/completions; vLLM renders the template, polar records its token ids
  vllm-tito    vLLM /v1/completions with token ids: polar renders and bridges (needs --tokenizer);
               every turn continues the previous prompt + sampled ids byte for byte, so
               multi-turn sessions merge into one trajectory without drift
  sglang-tito  SGLang /generate with token ids: polar renders and bridges (needs --tokenizer)
  nemo-rl      NeMo-RL's vLLM HTTP server during GRPO: polar hands back earlier calls' token ids
               and the server splices them (--temperature/--top-p must match training;
               sampling is always pinned)
  openai       any OpenAI-compatible server without token ids (recorded as text only)`;

export function upstreamOptionsFrom(flags: UpstreamFlags): Omit<UpstreamOptions, 'baseUrl'> {
  const out: Omit<UpstreamOptions, 'baseUrl'> = {};
  if (flags.tokenizer) out.tokenizer = flags.tokenizer;
  if (flags.toolParser) out.toolParser = flags.toolParser;
  if (flags.temperature !== undefined) out.temperature = flags.temperature;
  if (flags.topP !== undefined) out.topP = flags.topP;
  if (flags.thinking !== undefined) out.thinking = flags.thinking;
  return out;
}

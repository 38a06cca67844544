import { PolarError } from '../core/errors.js';
import path from 'node:path';
import { BUNDLED_QWEN3, qwen3ModelDir } from '../core/bundled-tokenizer.js';
import type { UpstreamHttpOptions } from './http.js';
import type { ToolCallFormat } from './tito/output-parser.js';
import type { ThinkingSetting } from './sampling-policy.js';
import { UPSTREAM_KINDS, type Upstream, type UpstreamKind } from './types.js';

export interface UpstreamOptions extends UpstreamHttpOptions {
  /** Token-in/token-out kinds: the model's tokenizer and chat template (`--tokenizer`). */
  tokenizer?: string;
  /** Overrides the tool-call format detected from the template (`--tool-parser`). */
  toolParser?: string;
  /** Test aid: check every bridged render against a render after the whole history. */
  checkBridges?: boolean;
  /** Benchmark aid: false renders every token-in call in full. */
  bridge?: boolean;
  /** nemo-rl: the training sampling pair NeMo-RL asserts. */
  temperature?: number;
  topP?: number;
  /** nemo-rl: the thinking switch it renders every call with (`--thinking`; sampling-policy.ts). */
  thinking?: ThinkingSetting;
  /** nemo-rl: how long a streaming call waits for the reply before opening the stream. */
  streamOpenAfterMs?: number;
}

export const TOOL_PARSERS: readonly ToolCallFormat[] = ['hermes', 'qwen3-coder'];

/**
 * The adapter for an upstream kind. Each kind's modules are loaded when it is asked for, so a
 * proxy in front of vLLM never loads the chat-template renderer and tokenizer of the token-in kinds.
 */
export async function createUpstream(kind: string, options: UpstreamOptions): Promise<Upstream> {
  if (!(UPSTREAM_KINDS as readonly string[]).includes(kind)) {
    throw new PolarError('POLAR_USAGE', `unknown --upstream-kind ${kind}; choose one of: ${UPSTREAM_KINDS.join(', ')}`);
  }
  switch (kind as UpstreamKind) {
    case 'vllm':
      return (await import('./vllm/index.js')).createVllmUpstream(options);
    case 'openai':
      return (await import('./openai/index.js')).createOpenAIUpstream(options);
    case 'nemo-rl':
      return new (await import('./nemo-rl/index.js')).NemoRlUpstream(options);
    case 'vllm-tito':
    case 'sglang-tito': {
      if (!options.tokenizer) {
        throw new PolarError(
          'POLAR_USAGE',
          `--upstream-kind ${kind} renders prompts itself: pass --tokenizer PATH (the model's Hugging Face folder) or --tokenizer bundled:qwen3`,
        );
      }
      const [{ loadChatTemplate }, { TokenInUpstream }, { vllmCompletionsDialect }, { sglangGenerateDialect }] = await Promise.all([
        import('./tito/chat-template.js'),
        import('./tito/upstream.js'),
        import('./vllm/completions.js'),
        import('./sglang/generate.js'),
      ]);
      const template = loadChatTemplate(options.tokenizer, qwen3ModelDir);
      if (options.toolParser) {
        if (!(TOOL_PARSERS as readonly string[]).includes(options.toolParser)) {
          throw new PolarError('POLAR_USAGE', `unknown --tool-parser ${options.toolParser}; choose one of: ${TOOL_PARSERS.join(', ')}`);
        }
        template.toolFormat = options.toolParser as ToolCallFormat;
      }
      const tokenizer = options.tokenizer === BUNDLED_QWEN3 ? options.tokenizer : path.resolve(options.tokenizer);
      return new TokenInUpstream(kind === 'vllm-tito' ? vllmCompletionsDialect : sglangGenerateDialect, { ...options, template, tokenizer });
    }
  }
}

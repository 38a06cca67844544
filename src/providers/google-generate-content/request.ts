import type { CanonicalRequest, ChatMessage, ChatToolCall } from '../../core/chat.js';
import { isRecord } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import { canonicalRequest } from '../canonical.js';
import type { DecodeContext } from '../types.js';
import { toJsonSchema } from './schema.js';
import type { GeminiCodecState, GeminiPart, GeminiRequest } from './types.js';

const MODEL_IN_PATH = /\/models\/([^:]+):/;

/**
 * Gemini contents as chat messages. `model` turns are assistant messages (thought parts become
 * reasoning, functionCall parts tool calls); in user turns, functionResponse parts become tool
 * messages, matched to their call by id, else by name in call order, then the turn's other parts
 * form a user message. Calls without an id get one from their position, so the same history always
 * maps to the same ids. The model name comes from the path.
 */
export function decodeGeminiRequest(body: unknown, ctx: DecodeContext): CanonicalRequest {
  if (!isRecord(body)) throw bad('request body must be a JSON object');
  const req = body as GeminiRequest;
  if (!Array.isArray(req.contents)) throw bad('`contents` must be an array', 'contents');
  const gen = isRecord(req.generationConfig) ? req.generationConfig : {};
  if (typeof gen.candidateCount === 'number' && gen.candidateCount > 1) {
    throw bad('polar records one sample per call: send separate calls instead of candidateCount > 1', 'generationConfig.candidateCount');
  }

  const messages: ChatMessage[] = [];
  const system = systemText(req.systemInstruction);
  if (system) messages.push({ role: 'system', content: system });
  let pending: { id: string; name: string; answered: boolean }[] = [];
  req.contents.forEach((content, ci) => {
    if (!isRecord(content)) throw bad(`contents[${ci}] must be an object`, 'contents');
    const parts = Array.isArray(content.parts) ? content.parts.filter(isRecord) : [];
    if (content.role === 'model') {
      const message = modelMessage(parts as GeminiPart[], ci);
      pending = (message.tool_calls ?? []).map((c) => ({ id: c.id!, name: c.function.name, answered: false }));
      messages.push(message);
    } else {
      messages.push(...userMessages(parts as GeminiPart[], pending));
    }
  });

  const out: Record<string, unknown> = { messages };
  const declarations = (Array.isArray(req.tools) ? req.tools : []).flatMap((t) =>
    isRecord(t) && Array.isArray(t.functionDeclarations) ? t.functionDeclarations : [],
  );
  if (!declarations.every(isRecord)) throw bad('each of `tools[].functionDeclarations` must be an object', 'tools');
  if (declarations.length > 0) {
    out.tools = declarations.map((d) => ({
      type: 'function',
      function: {
        name: d.name,
        description: d.description ?? '',
        parameters: d.parametersJsonSchema ?? (d.parameters ? toJsonSchema(d.parameters) : { type: 'object', properties: {} }),
      },
    }));
    const choice = toolChoice(req.toolConfig);
    if (choice !== undefined) out.tool_choice = choice;
  }
  if (typeof gen.maxOutputTokens === 'number') out.max_tokens = gen.maxOutputTokens;
  if (typeof gen.temperature === 'number') out.temperature = gen.temperature;
  if (typeof gen.topP === 'number') out.top_p = gen.topP;
  if (typeof gen.topK === 'number') out.top_k = gen.topK;
  if (Array.isArray(gen.stopSequences) && gen.stopSequences.length > 0) out.stop = gen.stopSequences;
  if (typeof gen.seed === 'number') out.seed = gen.seed;
  if (typeof gen.presencePenalty === 'number') out.presence_penalty = gen.presencePenalty;
  if (typeof gen.frequencyPenalty === 'number') out.frequency_penalty = gen.frequencyPenalty;
  const schema = gen.responseJsonSchema ?? (gen.responseSchema ? toJsonSchema(gen.responseSchema) : undefined);
  if (schema) out.response_format = { type: 'json_schema', json_schema: { name: 'response', schema } };
  else if (gen.responseMimeType === 'application/json') out.response_format = { type: 'json_object' };

  const thinkingConfig = isRecord(gen.thinkingConfig) ? gen.thinkingConfig : undefined;
  const state: GeminiCodecState = { includeThoughts: thinkingConfig?.includeThoughts === true };
  let thinking: boolean | undefined;
  if (thinkingConfig?.thinkingBudget === 0) thinking = false;
  else if (thinkingConfig?.includeThoughts === true || (typeof thinkingConfig?.thinkingBudget === 'number' && thinkingConfig.thinkingBudget !== 0))
    thinking = true;
  return canonicalRequest({
    model: MODEL_IN_PATH.exec(ctx.path)?.[1] ?? '',
    stream: ctx.path.endsWith(':streamGenerateContent'),
    body: out,
    thinking,
    codecState: state,
  });
}

function systemText(system: GeminiRequest['systemInstruction']): string {
  if (typeof system === 'string') return system;
  if (!isRecord(system) || !Array.isArray(system.parts)) return '';
  return system.parts
    .filter(isRecord)
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .filter(Boolean)
    .join('\n');
}

function modelMessage(parts: GeminiPart[], contentIndex: number): ChatMessage {
  const text: string[] = [];
  const thoughts: string[] = [];
  const calls: ChatToolCall[] = [];
  parts.forEach((p, pi) => {
    if (p.functionCall) {
      const id = p.functionCall.id || `call_${contentIndex}_${pi}`;
      calls.push({ id, type: 'function', function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } });
    } else if (typeof p.text === 'string') {
      (p.thought ? thoughts : text).push(p.text);
    }
  });
  const message: ChatMessage = { role: 'assistant', content: text.join('') };
  if (thoughts.length > 0) message.reasoning_content = thoughts.join('');
  if (calls.length > 0) message.tool_calls = calls;
  return message;
}

function userMessages(parts: GeminiPart[], pending: { id: string; name: string; answered: boolean }[]): ChatMessage[] {
  const tools: ChatMessage[] = [];
  const rest: unknown[] = [];
  for (const p of parts) {
    if (p.functionResponse) {
      const r = p.functionResponse;
      const match = (r.id && pending.find((c) => c.id === r.id)) || pending.find((c) => !c.answered && c.name === r.name);
      if (match) match.answered = true;
      tools.push({
        role: 'tool',
        tool_call_id: r.id || match?.id || `call_${r.name}`,
        content: typeof r.response === 'string' ? r.response : JSON.stringify(r.response ?? {}),
      });
    } else if (typeof p.text === 'string') {
      rest.push({ type: 'text', text: p.text });
    } else if (p.inlineData) {
      rest.push({ type: 'image_url', image_url: { url: `data:${p.inlineData.mimeType};base64,${p.inlineData.data}` } });
    } else if (p.fileData) {
      rest.push({ type: 'image_url', image_url: { url: p.fileData.fileUri } });
    }
  }
  const out = [...tools];
  if (rest.length > 0) {
    const onlyText = rest.every((r) => isRecord(r) && r.type === 'text');
    out.push({ role: 'user', content: onlyText ? rest.map((r) => (r as { text: string }).text).join('\n') : rest });
  }
  return out;
}

function toolChoice(config: GeminiRequest['toolConfig']): unknown {
  const fc = isRecord(config) && isRecord(config.functionCallingConfig) ? config.functionCallingConfig : undefined;
  switch (fc?.mode) {
    case 'AUTO':
    case 'VALIDATED':
      return 'auto';
    case 'NONE':
      return 'none';
    case 'ANY':
      return fc.allowedFunctionNames?.length === 1 ? { type: 'function', function: { name: fc.allowedFunctionNames[0] } } : 'required';
    default:
      return undefined;
  }
}

function bad(message: string, param?: string): PolarError {
  return new PolarError('POLAR_BAD_REQUEST', message, 400, param ? { param } : undefined);
}

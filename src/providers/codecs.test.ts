import { describe } from 'vitest';
import type { SseEvent } from '../core/sse/parse.js';
import { runCodecCases, type ReadBack } from './codec.cases.js';
import { CODECS } from './codecs.js';

type Rec = Record<string, any>;
const data = (events: SseEvent[]) => events.filter((e) => e.data !== '[DONE]').map((e) => ({ event: e.event, json: JSON.parse(e.data) as Rec }));

describe('openai-chat codec', () => {
  runCodecCases({
    codec: CODECS['openai-chat'],
    path: '/v1/chat/completions',
    request: (tools) => ({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      ...(tools.length ? { tools: tools.map((name) => ({ type: 'function', function: { name } })) } : {}),
    }),
    finish: { stop: 'stop', length: 'length', tool_calls: 'tool_calls' },
    readJson(reply): ReadBack {
      const m = (reply as Rec).choices[0].message;
      return {
        reasoning: m.reasoning_content ?? '',
        text: m.content ?? '',
        toolCalls: (m.tool_calls ?? []).map((c: Rec) => ({ name: c.function.name, args: JSON.parse(c.function.arguments) })),
        finish: (reply as Rec).choices[0].finish_reason,
      };
    },
    readStream(events): ReadBack {
      const out: ReadBack = { reasoning: '', text: '', toolCalls: [], finish: '' };
      const args: string[] = [];
      for (const { json } of data(events)) {
        const c = json.choices?.[0];
        if (!c) continue;
        out.reasoning += c.delta.reasoning_content ?? c.delta.reasoning ?? '';
        out.text += c.delta.content ?? '';
        for (const t of c.delta.tool_calls ?? []) {
          if (t.function?.name) out.toolCalls[t.index] = { name: t.function.name, args: null };
          args[t.index] = (args[t.index] ?? '') + (t.function?.arguments ?? '');
        }
        if (c.finish_reason) out.finish = c.finish_reason;
      }
      out.toolCalls.forEach((t, i) => (t.args = JSON.parse(args[i] || '{}')));
      return out;
    },
  });
});

describe('anthropic-messages codec', () => {
  runCodecCases({
    codec: CODECS['anthropic-messages'],
    path: '/v1/messages',
    request: (tools) => ({
      model: 'm',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'x' }],
      tools: tools.map((name) => ({ name, input_schema: { type: 'object' } })),
    }),
    finish: { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use' },
    readJson(reply): ReadBack {
      const r = reply as Rec;
      return {
        reasoning: r.content
          .filter((b: Rec) => b.type === 'thinking')
          .map((b: Rec) => b.thinking)
          .join(''),
        text: r.content
          .filter((b: Rec) => b.type === 'text')
          .map((b: Rec) => b.text)
          .join(''),
        toolCalls: r.content.filter((b: Rec) => b.type === 'tool_use').map((b: Rec) => ({ name: b.name, args: b.input })),
        finish: r.stop_reason,
      };
    },
    readStream(events): ReadBack {
      // A strict reader, like Claude Code's: a delta for a block that is not open is an error.
      const out: ReadBack = { reasoning: '', text: '', toolCalls: [], finish: '' };
      const open = new Map<number, Rec>();
      const seen = data(events).map((e) => e.json.type);
      if (seen[0] !== 'message_start' || seen.at(-1) !== 'message_stop') throw new Error(`bad envelope: ${seen.join(',')}`);
      for (const { json } of data(events)) {
        if (json.type === 'content_block_start') {
          if (open.size > 0) throw new Error('a block opened while another was open');
          open.set(json.index, { ...json.content_block, partial: '' });
        } else if (json.type === 'content_block_delta') {
          const b = open.get(json.index);
          if (!b) throw new Error(`delta for block ${json.index}, which is not open`);
          if (json.delta.type === 'text_delta') out.text += json.delta.text;
          if (json.delta.type === 'thinking_delta') out.reasoning += json.delta.thinking;
          if (json.delta.type === 'input_json_delta') b.partial += json.delta.partial_json;
          if (json.delta.type === 'signature_delta') b.signed = true;
        } else if (json.type === 'content_block_stop') {
          const b = open.get(json.index)!;
          if (b.type === 'thinking' && !b.signed) throw new Error('thinking block closed without a signature');
          if (b.type === 'tool_use') out.toolCalls.push({ name: b.name, args: JSON.parse(b.partial || '{}') });
          open.delete(json.index);
        } else if (json.type === 'message_delta') out.finish = json.delta.stop_reason;
      }
      return out;
    },
  });
});

describe('openai-responses codec', () => {
  const item = (o: Rec): ReadBack['toolCalls'][number] | null => (o.type === 'function_call' ? { name: o.name, args: JSON.parse(o.arguments) } : null);
  runCodecCases({
    codec: CODECS['openai-responses'],
    path: '/v1/responses',
    request: (tools) => ({ model: 'm', input: 'x', tools: tools.map((name) => ({ type: 'function', name, parameters: { type: 'object' } })) }),
    finish: { stop: 'completed', length: 'incomplete', tool_calls: 'completed' },
    readJson(reply): ReadBack {
      const r = reply as Rec;
      return {
        reasoning: r.output
          .filter((o: Rec) => o.type === 'reasoning')
          .map((o: Rec) => o.summary.map((s: Rec) => s.text).join(''))
          .join(''),
        text: r.output
          .filter((o: Rec) => o.type === 'message')
          .map((o: Rec) => o.content.map((c: Rec) => c.text).join(''))
          .join(''),
        toolCalls: r.output.map(item).filter(Boolean),
        finish: r.status,
      };
    },
    readStream(events): ReadBack {
      // As Codex reads it: items from output_item.done; deltas must follow their item's added event.
      const out: ReadBack = { reasoning: '', text: '', toolCalls: [], finish: '' };
      const added = new Set<string>();
      let last: Rec | null = null;
      for (const { json } of data(events)) {
        if (json.type === 'response.output_item.added') added.add(json.item.id);
        if (json.type?.endsWith('.delta') && !added.has(json.item_id)) throw new Error(`${json.type} before its item was added`);
        if (json.type === 'response.output_item.done') {
          const o = json.item;
          if (o.type === 'message') out.text += o.content.map((c: Rec) => c.text).join('');
          if (o.type === 'reasoning') out.reasoning += o.summary.map((s: Rec) => s.text).join('');
          const call = item(o);
          if (call) out.toolCalls.push(call);
        }
        if (json.type === 'response.completed' || json.type === 'response.incomplete') last = json.response;
      }
      out.finish = last?.status ?? '';
      if (last && JSON.stringify(last.output.map((o: Rec) => o.id)) === '[]' && out.toolCalls.length + out.text.length > 0)
        throw new Error('completed response lost its items');
      return out;
    },
  });
});

describe('google-generate-content codec', () => {
  runCodecCases({
    codec: CODECS['google-generate-content'],
    path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent',
    request: (tools) => ({
      contents: [{ role: 'user', parts: [{ text: 'x' }] }],
      generationConfig: { thinkingConfig: { includeThoughts: true } },
      ...(tools.length ? { tools: [{ functionDeclarations: tools.map((name) => ({ name, parameters: { type: 'OBJECT' } })) }] } : {}),
    }),
    finish: { stop: 'STOP', length: 'MAX_TOKENS', tool_calls: 'STOP' },
    readJson(reply): ReadBack {
      return readGemini([reply as Rec]);
    },
    readStream(events): ReadBack {
      return readGemini(data(events).map((e) => e.json));
    },
  });
});

function readGemini(frames: Rec[]): ReadBack {
  const out: ReadBack = { reasoning: '', text: '', toolCalls: [], finish: '' };
  for (const f of frames) {
    const c = f.candidates[0];
    for (const p of c.content.parts) {
      if (p.functionCall) out.toolCalls.push({ name: p.functionCall.name, args: p.functionCall.args });
      else if (p.thought) out.reasoning += p.text;
      else out.text += p.text ?? '';
    }
    if (c.finishReason) out.finish = c.finishReason;
  }
  return out;
}

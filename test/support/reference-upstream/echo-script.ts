import type { ChatBody } from '../../../src/mock-server/server.js';
import { textOf } from '../../../src/mock-server/server.js';
import type { ScriptedReply } from '../../../src/mock-server/sampler.js';

/**
 * The tests' script: echo the last message (so a test can see its request arrived whole), with
 * reasoning unless thinking is off; call the offered tools when the user says "use a tool" ("both"
 * for two parallel calls).
 */
export function echoScript(body: ChatBody): ScriptedReply {
  const last = [...body.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = textOf(last?.content);
  const thinking = body.chat_template_kwargs?.enable_thinking !== false;
  const tools = (body.tools ?? []) as { function?: { name?: string } }[];
  if (last?.role === 'user' && tools.length > 0 && /\buse (a|the) tools?\b/i.test(text)) {
    const names = tools.map((t) => t.function?.name ?? 'tool');
    const parallel = /\bboth\b/i.test(text) && names.length > 1;
    return {
      ...(thinking ? { reasoning: 'The user wants a tool call. I will call it with a path.' } : {}),
      toolCalls: (parallel ? names.slice(0, 2) : names.slice(0, 1)).map((name, i) => ({ name, arguments: { path: `src/file-${i}.ts`, recursive: i === 0 } })),
    };
  }
  return {
    ...(thinking ? { reasoning: `The last message has ${text.length} characters. Answer briefly — in plain words.` } : {}),
    content: `Hello! You said: “${text.slice(0, 60)}”. Café, naïve, 日本語 and emoji 🚀 all work.`,
  };
}

import { describe, expect, it } from 'vitest';
import { compareConversations, normalize } from './match.js';

const call = (id: string, args: string) => ({ id, type: 'function' as const, function: { name: 'bash', arguments: args } });

describe('matching a replayed request to the recorded one', () => {
  const recorded = [
    { role: 'system', content: 'You are an agent. Today is 2026-11-20. cwd /tmp/polar-demo-abc/workspace' },
    { role: 'user', content: 'List files in /tmp/polar-demo-abc/workspace <session_context>├── a.txt</session_context>' },
    { role: 'assistant', content: 'Looking.', tool_calls: [call('c1', '{"command":"ls -la","b":1}')] },
    { role: 'tool', tool_call_id: 'c1', content: '-rw-r--r-- 1 root root 5 Nov 20 10:01 a.txt' },
  ];

  it('tolerates what a replay is bound to change: system prompt, paths, dates, environment blocks, tool output, JSON key order', () => {
    const replayed = [
      { role: 'system', content: 'You are an agent. Today is 2026-11-24. cwd /tmp/polar-replay-xyz' },
      { role: 'user', content: 'List files in /tmp/polar-replay-xyz/w <session_context>(empty)</session_context>' },
      { role: 'assistant', content: 'Looking.', tool_calls: [call('c1', '{"b":1,"command":"ls -la"}')] },
      { role: 'tool', tool_call_id: 'c1', content: 'total 0' },
    ];
    expect(compareConversations(recorded, replayed)).toBeNull();
    expect(normalize('at 10:01 on 2026-11-20T10:01:02Z in /a/b/c')).toBe('at <time> on <date> in <path>');
  });

  it("reports the first real difference: the user's words, an assistant turn, a tool call, or the count", () => {
    expect(compareConversations(recorded, [recorded[0]!, { role: 'user', content: 'Delete the files' }])).toMatchObject({ message: 1, what: 'user text' });
    expect(compareConversations(recorded, [...recorded.slice(0, 2), { ...recorded[2]!, content: 'Looking!' }, recorded[3]!])).toMatchObject({
      message: 2,
      what: 'assistant text',
      expected: 'Looking.',
      found: 'Looking!',
    });
    expect(
      compareConversations(recorded, [...recorded.slice(0, 2), { ...recorded[2]!, tool_calls: [call('c1', '{"command":"rm -rf ."}')] }, recorded[3]!]),
    ).toMatchObject({ message: 2, what: 'tool call 0 arguments' });
    expect(compareConversations(recorded, recorded.slice(0, 3))).toMatchObject({ message: 3, what: 'message count' });
    expect(compareConversations(recorded, [...recorded.slice(0, 3), { ...recorded[3]!, tool_call_id: 'c9' }])).toMatchObject({
      message: 3,
      what: 'tool result for another call',
    });
  });
});

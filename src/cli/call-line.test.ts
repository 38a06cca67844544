import chalk from 'chalk';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RecordedCall } from '../session/call-feed.js';
import { callLine, replySummary } from './call-line.js';

const call = (over: Partial<RecordedCall>): RecordedCall => ({
  id: 'req_1',
  sessionId: 'ses_1',
  agentId: 'main',
  seq: 3,
  provider: 'anthropic-messages',
  method: 'POST',
  path: '/v1/messages',
  startedAt: 1_000,
  endedAt: 1_800,
  status: 'ok',
  httpStatus: 200,
  streamed: true,
  error: null,
  errorCode: null,
  finishReason: 'tool_calls',
  requestedModel: null,
  servedModel: null,
  tokenSource: 'upstream',
  promptTokenCount: 1234,
  sampledTokenCount: 56,
  tokenError: null,
  render: null,
  policyVersion: null,
  assistantMessage: null,
  ...over,
});

describe('a call as one line', () => {
  // The words, not the colours (a terminal, or FORCE_COLOR, would add escapes).
  beforeAll(() => {
    chalk.level = 0;
  });

  it('reads as the call, its API, its tokens, how it ended, its time and what the model did', () => {
    const line = callLine(
      call({
        assistantMessage: {
          role: 'assistant',
          content: '',
          tool_calls: [{ function: { name: 'Bash', arguments: '{"command":"ls -la","description":"List"}' } }],
        },
      }),
    );
    expect(line).toBe('call 3  anthropic-messages  1,234 → 56 tokens  tool_calls  800ms  Bash: ls -la');
  });

  it("names a sub-agent, and says an error's status and message instead of a reply", () => {
    const line = callLine(
      call({ agentId: 'a1b2', status: 'error', httpStatus: 400, error: 'prompt too long:\n  9000 tokens', promptTokenCount: null, endedAt: 3_500 }),
    );
    expect(line).toBe('call 3  agent a1b2  anthropic-messages  no token ids  error 400  2.5s  prompt too long: 9000 tokens');
  });

  it('summarises text, several tool calls, arguments that are not JSON, and reasoning alone', () => {
    expect(replySummary({ role: 'assistant', content: 'All done.\n\nThe file is written.' })).toBe('"All done. The file is written."');
    expect(replySummary({ role: 'assistant', content: [{ type: 'text', text: 'hi' }] })).toBe('"hi"');
    expect(
      replySummary({
        tool_calls: [
          { function: { name: 'Write', arguments: '{"file_path":"a.txt","content":"x"}' } },
          { function: { name: 'Read', arguments: '{"limit":3' } },
        ],
      }),
    ).toBe('Write: a.txt; Read {"limit":3');
    expect(replySummary({ role: 'assistant', content: '', reasoning_content: 'hmm' })).toBe('(reasoning only)');
    expect(replySummary(null)).toBe('');
    expect(replySummary({ content: 'x'.repeat(200) })).toHaveLength(80);
  });
});

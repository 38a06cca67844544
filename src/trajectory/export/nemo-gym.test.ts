import { describe, expect, it } from 'vitest';
import type { RequestRecord } from '../../store/requests.js';
import type { Trajectory } from '../types.js';
import { nemoGymResult, type NemoGymResult } from './nemo-gym.js';
import { joinTextParts } from './sft.js';

const tools = [{ type: 'function', function: { name: 'ls', description: 'list', parameters: { type: 'object' } } }];
const record = (
  id: string,
  messages: unknown[],
  assistant: unknown,
  promptIds: number[],
  sampledIds: number[],
  extra: Partial<RequestRecord> = {},
): RequestRecord =>
  ({
    id,
    provider: 'openai-chat',
    path: '/v1/chat/completions',
    startedAt: 1_763_800_000_500,
    servedModel: 'Qwen/Qwen3-8B',
    finishReason: 'stop',
    upstreamRequest: JSON.stringify({ messages, tools }),
    assistantMessage: assistant,
    promptIds,
    sampledIds,
    logprobs: sampledIds.map(() => -0.5),
    ...extra,
  }) as unknown as RequestRecord;
const trace = (ids: string[], reward: number | null = null) =>
  ({ session_id: 's', agent_id: 'main', trace_index: 0, request_ids: ids, reward }) as unknown as Trajectory;

describe('nemoGymResult', () => {
  const system = { role: 'system', content: [{ type: 'text', text: 'be brief' }] };
  const user = { role: 'user', content: 'look' };
  const call1 = { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'ls', arguments: '{}' } }] };
  const toolResult = { role: 'tool', tool_call_id: 'c1', content: 'a.ts' };
  const calls = [
    record('r1', [system, user], call1, [1, 2], [3, 4]),
    record(
      'r2',
      [system, user, call1, toolResult, { role: 'user', content: 'and now?' }],
      { role: 'assistant', content: 'done', reasoning_content: 'ok' },
      [1, 2, 3, 4, 5, 6],
      [7, 8],
    ),
  ];

  it("a merged trace becomes one rollout of real Responses items, token fields on each call's last item", () => {
    const result = nemoGymResult(trace(['r1', 'r2'], 1), calls) as NemoGymResult;
    expect(result.responses_create_params).toEqual({
      input: [
        { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'be brief' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }] },
      ],
      tools: [{ type: 'function', name: 'ls', description: 'list', parameters: { type: 'object' }, strict: false }],
    });
    const output = result.response.output;
    expect(output.map((o) => o.type)).toEqual(['function_call', 'function_call_output', 'message', 'reasoning', 'message']);
    expect(output[0]).toMatchObject({
      call_id: 'c1',
      name: 'ls',
      arguments: '{}',
      prompt_token_ids: [1, 2],
      generation_token_ids: [3, 4],
      generation_log_probs: [-0.5, -0.5],
    });
    expect(output[1]).toEqual({ type: 'function_call_output', call_id: 'c1', output: 'a.ts' });
    expect(output[2]).toEqual({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'and now?' }] });
    expect(output[3]).toMatchObject({ type: 'reasoning', summary: [{ type: 'summary_text', text: 'ok' }] });
    expect(output[3]).not.toHaveProperty('generation_token_ids');
    expect(output[4]).toMatchObject({
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'done', annotations: [] }],
      prompt_token_ids: [1, 2, 3, 4, 5, 6],
      generation_token_ids: [7, 8],
    });
    expect(result.response).toMatchObject({
      object: 'response',
      created_at: 1_763_800_000,
      model: 'Qwen/Qwen3-8B',
      status: 'completed',
      usage: { input_tokens: 8, output_tokens: 4, total_tokens: 12 },
    });
    expect(result.reward).toBe(1);
    expect(result.polar.rewarded).toBe(true);
  });

  it('a trace cut by the token limit is an incomplete response; an unrewarded one has reward 0 and says so', () => {
    const cut = [record('r1', [user], { role: 'assistant', content: 'part' }, [1], [2], { finishReason: 'length' })];
    const result = nemoGymResult(trace(['r1']), cut) as NemoGymResult;
    expect(result.response.status).toBe('incomplete');
    expect(result.reward).toBe(0);
    expect(result.polar.rewarded).toBe(false);
  });

  it('says why a trace cannot be exported', () => {
    expect(nemoGymResult(trace(['r1']), [record('r1', [], null, [1], [2])])).toEqual({ problem: expect.stringMatching(/no reply recorded/) });
  });
});

describe('joinTextParts', () => {
  it('joins text-only part lists with "\\n" and keeps lists that hold images', () => {
    expect(
      joinTextParts({
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      }),
    ).toEqual({ role: 'user', content: 'a\nb' });
    const image = {
      role: 'user',
      content: [
        { type: 'text', text: 'a' },
        { type: 'image_url', image_url: { url: 'data:' } },
      ],
    };
    expect(joinTextParts(image)).toBe(image);
    expect(joinTextParts({ role: 'user', content: 'plain' })).toEqual({ role: 'user', content: 'plain' });
  });
});

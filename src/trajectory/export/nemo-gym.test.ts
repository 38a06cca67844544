import { describe, expect, it } from 'vitest';
import type { RequestRecord } from '../../store/requests.js';
import type { Trajectory } from '../types.js';
import { nemoGymResult } from './nemo-gym.js';

const record = (id: string, messages: unknown[], assistant: unknown, promptIds: number[], sampledIds: number[]): RequestRecord =>
  ({ id, upstreamRequest: JSON.stringify({ messages, tools: [{ type: 'function', function: { name: 'ls', parameters: { type: 'object' } } }] }), assistantMessage: assistant, promptIds, sampledIds, logprobs: sampledIds.map(() => -0.5) }) as unknown as RequestRecord;

describe('nemoGymResult', () => {
  it('a merged trace becomes one rollout: calls in order, tool outputs between, token fields on each call\'s last item', () => {
    const user = { role: 'user', content: 'look' };
    const call1 = { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'ls', arguments: '{}' } }] };
    const calls = [
      record('r1', [user], call1, [1, 2], [3, 4]),
      record('r2', [user, call1, { role: 'tool', tool_call_id: 'c1', content: 'a.ts' }], { role: 'assistant', content: 'done', reasoning_content: 'ok' }, [1, 2, 3, 4, 5, 6], [7, 8]),
    ];
    const trace = { session_id: 's', agent_id: 'main', trace_index: 0, request_ids: ['r1', 'r2'], reward: null } as unknown as Trajectory;
    const result = nemoGymResult(trace, calls)!;
    expect(result.responses_create_params).toEqual({ input: [{ role: 'user', content: 'look' }], tools: [{ type: 'function', name: 'ls', description: '', parameters: { type: 'object' } }] });
    expect(result.response.output.map((o) => o.type)).toEqual(['function_call', 'function_call_output', 'reasoning', 'message']);
    expect(result.response.output[0]).toMatchObject({ call_id: 'c1', prompt_token_ids: [1, 2], generation_token_ids: [3, 4], generation_log_probs: [-0.5, -0.5] });
    expect(result.response.output[1]).toEqual({ type: 'function_call_output', call_id: 'c1', output: 'a.ts' });
    expect(result.response.output[3]).toMatchObject({ prompt_token_ids: [1, 2, 3, 4, 5, 6], generation_token_ids: [7, 8] });
    expect(result.response.output[2]).not.toHaveProperty('generation_token_ids');
  });

  it('refuses (null) calls recorded before assistant messages were', () => {
    const trace = { session_id: 's', agent_id: 'main', trace_index: 0, request_ids: ['r1'], reward: null } as unknown as Trajectory;
    expect(nemoGymResult(trace, [record('r1', [], null, [1], [2])])).toBeNull();
  });
});

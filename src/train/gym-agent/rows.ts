import { maskFields } from '../../rollout/sample-mask.js';
import { isRecord } from '../../core/chat.js';
import { parseJsonBody } from '../../core/http/body.js';
import { newId } from '../../core/ids.js';
import { type GymRunResult, placeholderItem } from './result.js';
import { RowRefused } from './task.js';

/**
 * NeMo Gym's rows as the agent reads and answers them: a `/run` body is one row (its task is
 * task.ts's to find, its result result.ts's to build); this holds the rest: the row itself,
 * the sampling it asks for, the placeholder for a row that could not run, and the step's metrics.
 */

/** A `/run` body: one JSON object, else the row is refused (RowRefused, or a 400 PolarError for bad JSON). */
export function parseRow(text: string): Record<string, unknown> {
  const body = parseJsonBody(text);
  if (!isRecord(body)) throw new RowRefused('a /run body is one JSON object (a NeMo Gym row)');
  return body;
}

/** The row's Responses parameters (NeMo-RL puts the training or validation sampling there). */
export function rowParams(row: Record<string, unknown>): Record<string, unknown> {
  return isRecord(row.responses_create_params) ? row.responses_create_params : {};
}

/** The sampling a row asks for: temperature, top_p, and its output cap (a whole number of tokens, at least 1). */
export function rowSampling(params: Record<string, unknown>): { temperature: number | undefined; topP: number | undefined; maxTokens: number | undefined } {
  const cap = num(params.max_output_tokens);
  return { temperature: num(params.temperature), topP: num(params.top_p), maxTokens: cap !== undefined && cap >= 1 ? Math.floor(cap) : undefined };
}

/** A row polar could not run (not a task, a broken workspace path): a masked placeholder, still 200. */
export function refusedResult(row: Record<string, unknown>, reason: string): GymRunResult {
  return {
    responses_create_params: row.responses_create_params ?? { input: [] },
    response: {
      id: `resp_${newId('req')}`,
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      model: 'polar',
      status: 'completed',
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: [],
      output: [placeholderItem('msg_refused')],
    },
    reward: 0,
    instance_config: { mask_sample: true },
    polar_mask_reason: `row refused: ${reason}`,
    polar_session_id: null,
    polar_calls: 0,
    polar_subagent_calls: 0,
    polar_side_calls: 0,
    polar_traces: 0,
    polar_masked: 1,
    ...maskFields([{ kind: 'refused', text: reason }]),
  };
}

/** `/aggregate_metrics`: the step's sample count and mean reward, in Gym's shape. */
export function aggregateMetrics(body: unknown): Record<string, unknown> {
  const responses = isRecord(body) && Array.isArray(body.verify_responses) ? body.verify_responses.filter(isRecord) : [];
  const rewards = responses.map((r) => r.reward).filter((r): r is number => typeof r === 'number');
  const mean = rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null;
  return { group_level_metrics: [], agent_metrics: { samples: responses.length, mean_reward: mean }, key_metrics: { mean_reward: mean } };
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

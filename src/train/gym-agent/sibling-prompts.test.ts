import { maskFields } from '../../rollout/sample-mask.js';
import { describe, expect, it } from 'vitest';
import type { GymRunResult } from './result.js';
import { placeholderItem } from './result.js';
import { refusedResult } from './rows.js';
import { SiblingPrompts } from './sibling-prompts.js';

/** A result whose calls have these first-prompt ids (two trainable items: the first one's prompt is what NeMo-RL groups by). */
function result(prompt: number[]): GymRunResult {
  const item = (p: number[], gen: number[]) => ({
    type: 'message',
    id: 'm',
    prompt_token_ids: p,
    generation_token_ids: gen,
    generation_log_probs: gen.map(() => -0.1),
  });
  return {
    responses_create_params: {},
    response: { output: [item(prompt, [9]), { type: 'function_call_output' }, item([...prompt, 9, 4], [8])] },
    reward: 1,
    polar_session_id: 's',
    polar_calls: 2,
    polar_subagent_calls: 0,
    polar_side_calls: 0,
    polar_traces: 1,
    polar_masked: 0,
    ...maskFields([]),
  };
}

describe('SiblingPrompts: the live first-prompt check of a group', () => {
  it('a group of 4 sharing one first prompt: no split, nothing said', () => {
    const said: string[] = [];
    const s = new SiblingPrompts((l) => said.push(l));
    const groups = [0, 1, 2, 3].map((i) => s.join('t', i));
    expect(new Set(groups).size).toBe(1);
    const checks = groups.map((g) => s.check('t', g, result([1, 2, 3])));
    expect(checks.map((c) => c.polar_first_prompt_split)).toEqual([0, 0, 0, 0]);
    expect(said).toEqual([]);
  });

  it('siblings whose first prompts differ: flagged from the first difference on, said loudly once', () => {
    const said: string[] = [];
    const s = new SiblingPrompts((l) => said.push(l));
    const groups = [0, 1, 2, 3].map((i) => s.join('t', i));
    const checks = groups.map((g, i) => s.check('t', g, result([1, 2, 100 + (i % 2)])));
    expect(checks.map((c) => c.polar_first_prompt_split)).toEqual([0, 1, 1, 1]);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/^polar gym-agent: FIRST PROMPT SPLIT: task t: its samples have 2 different first prompts \(samples 0 and 1 part at token 2/);
  });

  it('a repeated _rowidx starts a new group (the next step), other tasks are never siblings', () => {
    const s = new SiblingPrompts(() => {});
    const step1 = [0, 1].map((i) => s.join('t', i));
    const other = s.join('u', 2);
    const step2 = [0, 1].map((i) => s.join('t', i));
    expect(step1[0]).toBe(step1[1]);
    expect(step2[0]).toBe(step2[1]);
    expect(step2[0]).not.toBe(step1[0]);
    expect(other).not.toBe(step1[0]);
    // The render changed between steps: not a split within either.
    for (const g of step1) expect(s.check('t', g, result([1])).polar_first_prompt_split).toBe(0);
    expect(s.check('u', other, result([2])).polar_first_prompt_split).toBe(0);
    for (const g of step2) expect(s.check('t', g, result([3])).polar_first_prompt_split).toBe(0);
  });

  it('a masked placeholder or a refused row is not compared, and says so', () => {
    const said: string[] = [];
    const s = new SiblingPrompts((l) => said.push(l));
    const [a, b, c] = [0, 1, 2].map((i) => s.join('t', i));
    expect(s.check('t', a!, result([1, 2]))).toEqual({ polar_first_prompt_split: 0, polar_first_prompt_unchecked: 0 });
    const placeholder = { ...result([0]), response: { output: [placeholderItem('msg_x_placeholder')] } };
    expect(s.check('t', b!, placeholder)).toEqual({ polar_first_prompt_split: 0, polar_first_prompt_unchecked: 1 });
    expect(s.check('t', c!, refusedResult({}, 'no such task'))).toEqual({ polar_first_prompt_split: 0, polar_first_prompt_unchecked: 1 });
    expect(s.check(null, s.join(null, 3), refusedResult({}, 'no such task'))).toEqual({ polar_first_prompt_split: 0, polar_first_prompt_unchecked: 1 });
    // Once per group, with the first reason.
    expect(said).toEqual(["polar gym-agent: task t: a sample's first prompt could not be compared with its siblings' (a masked placeholder)"]);
  });
});

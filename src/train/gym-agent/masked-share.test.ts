import { describe, expect, it } from 'vitest';
import { type MaskReason, maskFields } from '../../rollout/sample-mask.js';
import { MaskedShare } from './masked-share.js';
import type { GymRunResult } from './result.js';

function row(reasons: MaskReason[]): GymRunResult {
  return {
    responses_create_params: {},
    response: { output: [] },
    reward: 0,
    ...(reasons.length > 0 ? { instance_config: { mask_sample: true as const }, polar_mask_reason: reasons.map((r) => r.text).join('; ') } : {}),
    polar_session_id: 's',
    polar_calls: 3,
    polar_subagent_calls: 0,
    polar_side_calls: 0,
    polar_traces: reasons.some((r) => r.kind === 'split') ? 2 : 1,
    polar_masked: reasons.length > 0 ? 1 : 0,
    ...maskFields(reasons),
  };
}
const split: MaskReason = { kind: 'split', text: "not append-only: the session's main agent merged into 2 traces" };

describe('MaskedShare: the masked share of each step of rows', () => {
  it("every answer carries one 0/1 field per kind (NeMo-RL logs only the first result's keys)", () => {
    const fields = maskFields([split]);
    expect(Object.keys(fields).sort()).toEqual(
      ['error', 'no_logprobs', 'no_reward', 'no_token_ids', 'refused', 'split', 'timeout', 'unexportable'].map((k) => `polar_masked_${k}`),
    );
    expect(fields.polar_masked_split).toBe(1);
    expect(Object.values(maskFields([])).every((v) => v === 0)).toBe(true);
  });

  it('says nothing for a step at or under a quarter masked, and judges each step of rows once', () => {
    const share = new MaskedShare(4, null);
    expect([row([split]), row([]), row([]), row([])].map((r) => share.record(r))).toEqual([null, null, null, null]);
    // The next step starts afresh: three of four masked is said, as a warning, at its last row.
    const said = [row([split]), row([split]), row([split]), row([])].map((r) => share.record(r));
    expect(said.slice(0, 3)).toEqual([null, null, null]);
    expect(said[3]).toMatchObject({ stop: false });
    expect(said[3]!.line).toMatch(/^warning: step 2 of rows: 3 of 4 samples masked .*3 not append-only/);
    expect(share.tripped).toBeNull();
  });

  it('with --max-masked-share, a step above it trips: that row and every later one stops NeMo-RL', () => {
    const share = new MaskedShare(2, 0.5);
    expect(share.record(row([split]))).toBeNull();
    const trip = share.record(row([{ kind: 'timeout', text: 'the session ran past its budget (timeout)' }]));
    expect(trip).toMatchObject({ stop: true });
    expect(trip!.line).toMatch(/2 of 2 samples masked.*1 not append-only.*1 ran past their time budget.*More than --max-masked-share 0.5: stopping NeMo-RL/);
    expect(share.tripped).toBe(trip!.line);
    expect(share.record(row([]))).toEqual({ line: trip!.line, stop: true });
  });

  it('at exactly the limit it does not trip (it still warns: above a quarter)', () => {
    const share = new MaskedShare(2, 0.5);
    share.record(row([split]));
    expect(share.record(row([]))).toMatchObject({ stop: false, line: expect.stringMatching(/^warning: /) });
    expect(share.tripped).toBeNull();
  });
});

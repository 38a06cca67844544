import { describe, expect, it } from 'vitest';
import { phasesJson, phasesText, samplePhases } from './phases.js';

describe("a sample's phases", () => {
  it('come in the order a sample goes through them, by name', () => {
    const timing = { total_ms: 9000, verify_ms: 800, collect_ms: 200, run_ms: 3000, ready_ms: 100, init_ms: 4500, provision_ms: 0, post_ms: 1000 };
    expect(samplePhases(timing).map((p) => p.name)).toEqual(['build', 'prepare', 'wait', 'agent', 'collect', 'verify', 'total']);
    expect(phasesJson(timing)).toEqual({ build_ms: 0, prepare_ms: 4500, wait_ms: 100, agent_ms: 3000, collect_ms: 200, verify_ms: 800, total_ms: 9000 });
    expect(phasesText(timing)).toBe('build 0.0 s · prepare 4.5 s · wait 0.1 s · agent 3.0 s · collect 0.2 s · verify 0.8 s · total 9.0 s');
  });

  it("a multi-step task's step setup and step verifiers are phases of their own", () => {
    expect(phasesText({ init_ms: 300, ready_ms: 0, steps_prepare_ms: 5100, run_ms: 250, steps_verify_ms: 400, collect_ms: 450, verify_ms: 180 })).toBe(
      'prepare 0.3 s · wait 0.0 s · step setup 5.1 s · agent 0.3 s · step verify 0.4 s · collect 0.5 s · verify 0.2 s',
    );
  });

  it('a row recorded before POSTRUN was split shows its post time whole; a sample that never started has none', () => {
    expect(phasesText({ init_ms: 1200, ready_ms: 5, run_ms: 64_000, post_ms: 2500 })).toBe('prepare 1.2 s · wait 0.0 s · agent 64.0 s · post 2.5 s');
    expect(phasesText({})).toBeNull();
    expect(phasesText({ run_ms: 612_000 })).toBe('agent 612 s');
  });
});

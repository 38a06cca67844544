/**
 * A sample's time by phase, as `polar rollout show` reports it, from the `timing` the stages record
 * (milliseconds, rollout/stages.ts and step-stages.ts). Each phase has its own budget, as Harbor
 * gives them (trial/trial.py): the image's build under build_timeout_sec, the preparation under its
 * own, the agent under its timeout from its start, the verifier under its timeout_sec.
 */
export interface Phase {
  /** The name shown and the `--json` key (`<name>_ms`). */
  name: string;
  ms: number;
}

/** In the order a sample goes through them: timing key → phase name. */
const PHASES: readonly (readonly [key: string, name: string])[] = [
  // The task's image (once per process; a later sample waits for the first one's build or finds it built).
  ['provision_ms', 'build'],
  // The environment's start (a container and its healthcheck), the starting state, setup commands, the baseline.
  ['init_ms', 'prepare'],
  // Prepared, waiting for a run slot (--concurrency).
  ['ready_ms', 'wait'],
  // A multi-step task's steps: each one's workdir files, setup.sh and healthcheck, before its agent.
  ['steps_prepare_ms', 'step_setup'],
  // The harness (or oracle, nop, a forger): every step's agent together.
  ['run_ms', 'agent'],
  // A multi-step task's verifiers of every step but the last, during RUNNING.
  ['steps_verify_ms', 'step_verify'],
  // After the agent: its processes stopped, its work copied out and diffed.
  ['collect_ms', 'collect'],
  // The evaluator or Harbor verifier (the last step's, for a multi-step task).
  ['verify_ms', 'verify'],
];

/** A sample's phases with the time each took; phases it never reached are left out. */
export function samplePhases(timing: Readonly<Record<string, number>>): Phase[] {
  const out: Phase[] = [];
  for (const [key, name] of PHASES) {
    const ms = timing[key];
    if (typeof ms === 'number') out.push({ name, ms });
  }
  // Recorded before POSTRUN was split into collect and verify: its time whole.
  if (timing.collect_ms === undefined && timing.verify_ms === undefined && typeof timing.post_ms === 'number') out.push({ name: 'post', ms: timing.post_ms });
  if (typeof timing.total_ms === 'number') out.push({ name: 'total', ms: timing.total_ms });
  return out;
}

/** `--json`: `{ build_ms, prepare_ms, wait_ms, agent_ms, collect_ms, verify_ms, total_ms, … }`. */
export function phasesJson(timing: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(samplePhases(timing).map((p) => [`${p.name}_ms`, p.ms]));
}

/** One line for the text view: `build 0.0 s · prepare 1.2 s · wait 0.0 s · agent 3.4 s · …`; null with no timing. */
export function phasesText(timing: Readonly<Record<string, number>>): string | null {
  const phases = samplePhases(timing);
  if (phases.length === 0) return null;
  return phases.map((p) => `${p.name.replace('_', ' ')} ${seconds(p.ms)}`).join(' · ');
}

function seconds(ms: number): string {
  return ms >= 100_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
}

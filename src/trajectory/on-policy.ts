import type { Store } from '../store/store.js';
import { TRAINER_TEMPERATURE, TRAINER_TOP_P } from '../upstream/sampling-policy.js';

/** The sampling a session's run was configured with, that its calls are judged against. */
export interface RunSampling {
  temperature: number;
  topP: number;
}

/** How reconstruction treats calls not sampled with the run's parameters (sampling-policy.ts offPolicyReason). */
export interface OnPolicyOptions {
  /** Keep them trainable (`--include-off-policy`); by default they are left out of the loss. */
  includeOffPolicy?: boolean;
  /** The run's configured pair; null: each call's own pinned values (or the trainer's defaults). */
  run?: RunSampling | null;
}

/**
 * The pair a rollout sample's calls should have been sampled with: the rollout's configured
 * --temperature / --top-p (NeMo-RL's 1.0 / 1.0 when it gave none). Null outside a rollout, and for
 * gym-agent sessions, whose rows carry NeMo-RL's training or validation pair call by call.
 */
export function runSampling(store: Store, sessionId: string): RunSampling | null {
  const sample = store.rollouts.sampleForSession(sessionId);
  if (!sample) return null;
  const config = store.rollouts.get(sample.rolloutId)?.config as { source?: string; upstream?: { temperature?: unknown; topP?: unknown } } | undefined;
  if (!config || config.source === 'gym-agent') return null;
  const t = config.upstream?.temperature;
  const p = config.upstream?.topP;
  return { temperature: typeof t === 'number' ? t : TRAINER_TEMPERATURE, topP: typeof p === 'number' ? p : TRAINER_TOP_P };
}

import type { HarborTrial } from './types.js';

/**
 * Harbor's default network is public (`network_mode`, models/task/config.py:373-379 and :782-795);
 * polar's is none, since the agent's code runs under test.sh (rollout/sandboxing.ts). Said where
 * that difference can explain an outcome, and only there.
 */
export const NO_NETWORK_HINT =
  "the verifier had no network: task.toml does not say whether it may use the internet (Harbor's default is public, polar's none); --network host gives Harbor's default";

/**
 * The hint for one verifier run, or null: only when the verifier had no network, its task.toml does
 * not forbid the internet, and the run paid nothing or was forfeited (a timeout is one): a verifier
 * that installs its test runner at verify time (`uvx`, `pip`) ends so. A task that forbids the
 * internet, a run that had the network, or one that earned reward says nothing about the network.
 */
export function networkHint(
  trial: Pick<HarborTrial, 'verifierNetwork'>,
  verifierNetwork: 'host' | 'none',
  outcome: { reward: number; forfeit: string | null },
): string | null {
  if (verifierNetwork !== 'none' || trial.verifierNetwork !== null) return null;
  return outcome.forfeit !== null || outcome.reward <= 0 ? NO_NETWORK_HINT : null;
}

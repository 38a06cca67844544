import type { ComposePlan } from '../../boxes/compose/plan.js';
import type { Box, BoxNetwork, BoxProvider, HarnessHost, ProcessCount } from '../../boxes/types.js';
import type { HarborTrial, SeparateVerifier } from '../../harbor/types.js';
import { StageError } from '../../stage-error.js';
import type { OpenSandbox, PreparedWorkspace } from '../../workspace.js';
import type { EnvironmentDeps, SampleSpec } from '../deps.js';

/** A box of a provider, with whichever optional powers it has. */
export type AgentBox = Box & Partial<HarnessHost & ProcessCount>;

/** One sample in a provider's boxes: what its steps share, and the boxes it holds now. */
export interface BoxSample {
  readonly provider: BoxProvider;
  readonly deps: EnvironmentDeps;
  readonly spec: SampleSpec;
  readonly trial: HarborTrial;
  /** Harbor's separate verifier (`[verifier] environment_mode = "separate"`), when the task asks for one. */
  readonly separate: SeparateVerifier | undefined;
  /** polar's git (the baseline, the diff) runs sandboxed unless --sandbox none. */
  readonly gitSandbox: OpenSandbox | undefined;
  /** The task's setup commands' sandbox (INIT). */
  readonly setup: OpenSandbox | undefined;
  /** The agent's box, from INIT until collect. */
  agent: AgentBox | null;
  /** The task's compose file as polar runs it (null: none), read at INIT. */
  plan: ComposePlan | null;
  /** The task's compose services (its sidecars), from INIT until dispose. */
  services: SampleServices | null;
  workspace: PreparedWorkspace | null;
  /** Networks the sample made for its boxes with the internet, by box id; removed at dispose. */
  networks: Map<string, string>;
  /** Harbor's artifacts, copied out of the agent's box (and its services) at collect, for a separate verifier. */
  artifacts: Record<string, string>;
}

/** The agent's box, or a stage error where it is gone. */
export function live(s: BoxSample): AgentBox {
  if (!s.agent) throw new StageError('run', "the sample's container is gone");
  return s.agent;
}

/** The prepared workspace, or a stage error where INIT never made it. */
export function prepared(s: BoxSample): PreparedWorkspace {
  if (!s.workspace) throw new StageError('post', 'the workspace was never prepared');
  return s.workspace;
}

/** A compose task's services besides the agent's (its sidecars), on one network of their own. */
export interface SampleServices {
  readonly network: string;
  /** How the agent's box (and a verifier's fresh one) joins it: as the `main` service, with main's aliases. */
  readonly mainNetwork: BoxNetwork;
  /** A running service's box by its compose name (collect hooks and artifacts with `service`). */
  box(service: string): Box | undefined;
  /** Removes every service box and the network. */
  remove(): Promise<void>;
}

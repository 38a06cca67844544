import { Option } from 'commander';
import { chooseEnvironment, HARBOR_ENVIRONMENTS, type HarborEnvironment } from '../rollout/harbor/environment.js';

/** `--environment`, as every command that runs Harbor tasks takes it. */
export function environmentOption(): Option {
  return new Option(
    '--environment <env>',
    "where Harbor tasks' trials run: a container engine (the task's own image; the default where one works) or host (polar's sandbox on this machine; the default otherwise)",
  ).choices([...HARBOR_ENVIRONMENTS]);
}

/** The environment for a run: the engines are probed only when it has Harbor tasks. */
export function harborEnvironment(asked: HarborEnvironment | undefined, hasHarborTasks: boolean): HarborEnvironment {
  return hasHarborTasks ? chooseEnvironment(asked) : 'host';
}

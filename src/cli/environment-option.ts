import { Option } from 'commander';
import { chooseEnvironment } from '../rollout/environments/choose.js';
import { ENVIRONMENT_NAMES, type EnvironmentName } from '../rollout/environments/names.js';

/** `--environment`, as every command that runs Harbor tasks takes it. */
export function environmentOption(): Option {
  return new Option(
    '--environment <env>',
    "where Harbor tasks' trials run: a container engine (the task's own image; the default where one works) or host (polar's sandbox on this machine; the default otherwise)",
  ).choices([...ENVIRONMENT_NAMES]);
}

/** The environment for a run: the engines are probed only when it has Harbor tasks. */
export function harborEnvironment(asked: EnvironmentName | undefined, hasHarborTasks: boolean): EnvironmentName {
  return hasHarborTasks ? chooseEnvironment(asked) : 'host';
}

import { isRecord } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import { validateTaskObject, type RolloutTask } from '../../rollout/task-file.js';

/**
 * Which task a `/run` row runs (pure). A row is a request from the network, and a task is code to
 * run (setup commands, an evaluator command): so `polar gym-agent` runs only the tasks it was
 * started with (`--tasks FILE`), and a row names one by `task_id` at its top level, where NeMo Gym
 * and NeMo-RL pass a row's own fields through untouched. A row that defines a task inline is refused
 * unless the agent was started with `--allow-inline-tasks` (and then the task still runs sandboxed).
 *
 * A refusal here is a misconfiguration, not a rollout that failed: it throws a 400 PolarError, which
 * the agent answers as HTTP 400 so NeMo-RL stops at once with the reason, instead of training for
 * hours on masked samples. Rows that resolve to a task keep the 200-with-`mask_sample` contract for
 * anything that goes wrong later.
 */
export const TASK_ID_FIELD = 'task_id';

export interface TaskCatalog {
  /** The tasks of `--tasks FILE`, by id (empty without one). */
  tasks: ReadonlyMap<string, RolloutTask>;
  /** The file they came from, for messages. */
  file: string | null;
  allowInline: boolean;
}

/** Thrown for a row polar will not run at all; the agent answers it 400. */
export class RowRefused extends PolarError {
  constructor(message: string) {
    super('POLAR_BAD_REQUEST', message, 400);
  }
}

export function taskForRow(row: Record<string, unknown>, catalog: TaskCatalog): RolloutTask {
  if (row.task !== undefined) {
    if (!catalog.allowInline) {
      throw new RowRefused(
        `the row defines its task inline ("task"); polar gym-agent runs only the tasks of its --tasks file, named by "${TASK_ID_FIELD}" (start it with --allow-inline-tasks to run inline tasks, sandboxed)`,
      );
    }
    return inlineTask(row);
  }
  const id = row[TASK_ID_FIELD];
  if (typeof id !== 'string' || id === '') {
    throw new RowRefused(`the row names no task: put "${TASK_ID_FIELD}": ID (a task of ${catalog.file ?? 'the --tasks file'}) at its top level`);
  }
  const task = catalog.tasks.get(id);
  if (!task)
    throw new RowRefused(`unknown ${TASK_ID_FIELD} ${JSON.stringify(id.slice(0, 200))}: not a task of ${catalog.file ?? 'the --tasks file (none was given)'}`);
  return task;
}

/**
 * An inline task (`--allow-inline-tasks` only). Its prompt defaults to the row's user input. An
 * invalid one is a row that cannot run: validateTaskObject's 400 is answered masked, as before.
 */
function inlineTask(row: Record<string, unknown>): RolloutTask {
  const params = isRecord(row.responses_create_params) ? row.responses_create_params : {};
  const prompt = userText(params.input);
  const value = isRecord(row.task) ? { ...row.task, ...(prompt && !row.task.prompt ? { prompt } : {}) } : row.task;
  const task = validateTaskObject(value, { name: 'row.task', baseDir: process.cwd(), checkPaths: true });
  // polar copies or clones a workspace outside the sandbox, so a task from the network may not name
  // this machine's folders (a "dir" of /root would hand the agent ~/.ssh), nor ask for its network.
  if ('dir' in task.workspace || ('git' in task.workspace && !/^https?:\/\//i.test(task.workspace.git))) {
    throw new RowRefused(
      'an inline task\'s workspace must be {"empty": true} or {"git": "https://…", "commit": …}: a folder or repository on this machine is not for rows from the network',
    );
  }
  if (task.network === 'host') throw new RowRefused('an inline task cannot ask for the host network; put it in the --tasks file');
  return task;
}

export function userText(input: unknown): string | null {
  if (typeof input === 'string') return input;
  if (!Array.isArray(input)) return null;
  const texts: string[] = [];
  for (const item of input) {
    if (!isRecord(item) || (item.role !== undefined && item.role !== 'user')) continue;
    if (typeof item.content === 'string') texts.push(item.content);
    else if (Array.isArray(item.content)) for (const part of item.content) if (isRecord(part) && typeof part.text === 'string') texts.push(part.text);
  }
  return texts.length > 0 ? texts.join('\n') : null;
}

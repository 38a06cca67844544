import { isHarborPath, readHarborTasks } from './harbor/load.js';
import { readTaskFile, type RolloutTask } from './task-file.js';

/**
 * `--tasks PATH`: a JSONL task file, or a Harbor task folder or a folder of them (a dataset). Either
 * way every problem is reported at once, before anything starts.
 */
export function loadTasks(p: string): RolloutTask[] {
  return isHarborPath(p) ? readHarborTasks(p) : readTaskFile(p);
}

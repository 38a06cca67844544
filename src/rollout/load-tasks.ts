import { PolarError } from '../core/errors.js';
import { invalidTasksText, isHarborPath, readHarborSuite } from './harbor/load.js';
import { readTaskFile, type RolloutTask } from './task-file.js';

/**
 * `--tasks PATH`: a JSONL task file, or a Harbor task folder or a folder of them (a dataset). A JSONL
 * file's problems, or one Harbor task folder's, are a usage error listing every one before anything
 * starts. In a Harbor dataset an invalid task is skipped, each with a notice giving its reasons
 * (`notice`, stderr by default: a skipped task is never silent), and the rest run; a usage error only when no task of it is valid.
 */
export function loadTasks(p: string, notice: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): RolloutTask[] {
  if (!isHarborPath(p)) return readTaskFile(p);
  const suite = readHarborSuite(p);
  if (suite.invalid.length > 0 && (suite.single || suite.tasks.length === 0))
    throw new PolarError(
      'POLAR_USAGE',
      `${suite.single ? 'the Harbor task' : `none of the ${suite.invalid.length} Harbor tasks in ${p} is valid: they`} ha${suite.single ? 's' : 've'} ${invalidTasksText(suite.invalid)}`,
    );
  for (const t of suite.invalid) notice(`notice: task ${t.id} skipped (invalid): ${t.problems.join('; ')}`);
  return suite.tasks;
}

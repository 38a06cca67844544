import fs from 'node:fs';
import path from 'node:path';
import type { BoxSample, SampleServices } from './state.js';

/** environment/docker-compose.yaml, where the task has one. */
export function composeFile(dir: string): string | null {
  const file = path.join(dir, 'environment', 'docker-compose.yaml');
  return fs.existsSync(file) ? file : null;
}

/** A compose task's services besides `main`, started and healthy as its depends_on asks; null without compose. */
export async function startTaskServices(s: BoxSample): Promise<SampleServices | null> {
  if (!composeFile(s.trial.dir)) return null;
  throw new Error('compose: not wired yet');
}

import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { invalidTasksText, readHarborSuite } from '../rollout/harbor/load.js';
import type { RolloutTask } from '../rollout/task-file.js';
import type { ServedTask } from './request.js';

/**
 * A served task with a runtime, written as the Harbor task folder polar runs in a box (`polar serve
 * --environment podman|docker`): its image with the runtime's env and prepare steps built in
 * (environment/Dockerfile), its instruction, and the harbor evaluator's tests (tests/). Then read
 * back by the Harbor loader, so the request goes through the same checks and the same box, verifier
 * and collection as any Harbor task. Differences from Polar, said in the README: prepare runs once,
 * when the image is built (Polar runs it at each session's INIT in a fresh container, which a
 * built image reproduces for commands that do not read the session's variables); the verifier is
 * polar's Harbor verifier (tests mounted for it alone, rewards read from /logs/verifier).
 */
export async function writeRuntimeTask(served: ServedTask, parent: string, filesRoot: string | null): Promise<RolloutTask> {
  const runtime = served.runtime!;
  // Named by what it holds: the same runtime is the same Harbor task, whose image is built once.
  const name = `runtime-${createHash('sha256')
    .update(JSON.stringify({ runtime, harbor: served.harbor, prompt: served.task.prompt }))
    .digest('hex')
    .slice(0, 16)}`;
  const dir = path.join(parent, name);
  await fsp.rm(dir, { recursive: true, force: true });
  await fsp.mkdir(path.join(dir, 'environment'), { recursive: true });
  await fsp.mkdir(path.join(dir, 'tests'), { recursive: true });
  const lines = [`FROM ${runtime.image}`];
  for (const [key, value] of Object.entries(runtime.env)) lines.push(`ENV ${key}="${dockerQuoted(value)}"`);
  for (const [i, step] of runtime.prepare.entries()) {
    if ('upload' in step) {
      const source = await readable(step.upload, filesRoot, ['runtime', 'prepare', i, 'source']);
      await fsp.cp(source, path.join(dir, 'environment', `upload-${i}`), { recursive: true });
      lines.push(`COPY ${JSON.stringify([`upload-${i}`, step.target])}`);
    } else {
      const env = Object.entries(step.env).map(([k, v]) => `export ${k}=${shellQuote(v)}; `);
      lines.push(`RUN ${JSON.stringify(['/bin/sh', '-c', `mkdir -p ${shellQuote(step.cwd)} && cd ${shellQuote(step.cwd)} && ${env.join('')}${step.exec}`])}`);
    }
  }
  if (runtime.workdir) lines.push(`WORKDIR ${runtime.workdir}`);
  await fsp.writeFile(path.join(dir, 'environment', 'Dockerfile'), `${lines.join('\n')}\n`);
  await fsp.writeFile(path.join(dir, 'instruction.md'), `${served.task.prompt}\n`);
  await fsp.writeFile(path.join(dir, 'task.toml'), taskToml(served));
  if (served.harbor) {
    const tests = await readable(served.harbor.testsDir, filesRoot, ['evaluator', 'config', 'tests_dir']);
    if (!(await fsp.stat(tests)).isDirectory()) throw unsupported(['evaluator', 'config', 'tests_dir'], `${tests} is not a folder`);
    await fsp.cp(tests, path.join(dir, 'tests'), { recursive: true });
  } else await fsp.writeFile(path.join(dir, 'tests', 'test.sh'), '#!/bin/sh\n# session_completed scores this task; no test runs.\nexit 0\n');
  const suite = readHarborSuite(dir);
  const loaded = suite.tasks[0];
  if (!loaded) throw unsupported(['runtime'], `the runtime does not make a task polar can run: ${invalidTasksText(suite.invalid)}`);
  return {
    ...loaded,
    id: served.task.id,
    prompt: served.task.prompt,
    metadata: served.task.metadata,
    timeout: served.task.timeout,
    evaluator: served.evaluator === 'harbor' ? loaded.evaluator : { type: 'session-completed' },
  };
}

/**
 * A file or folder a request names on this machine, read only under the folder the operator gave
 * (`polar serve --runtime-files DIR`), links resolved first: whoever may submit a task may not copy
 * serve's own files (its database, credentials) into an image it then reads.
 */
async function readable(named: string, root: string | null, loc: (string | number)[]): Promise<string> {
  if (root === null) throw unsupported(loc, `${named}: polar serve reads files a request names only under --runtime-files DIR (none was given)`);
  const real = await fsp.realpath(path.resolve(root, named)).catch(() => null);
  const top = await fsp.realpath(root);
  if (real === null) throw unsupported(loc, `${named} is not a folder on this machine (looked for under --runtime-files ${top})`);
  if (real !== top && !real.startsWith(top + path.sep)) throw unsupported(loc, `${named} is outside --runtime-files ${top}`);
  return real;
}

/** A 400 naming the request's field, as request.ts refuses (the service answers it in that shape). */
export function unsupported(loc: (string | number)[], msg: string): PolarError {
  return Object.assign(new PolarError('POLAR_USAGE', msg, 400), { loc });
}

function taskToml(served: ServedTask): string {
  const runtime = served.runtime!;
  const lines = ['version = "1.0"', '', '[agent]', `timeout_sec = ${Number(served.task.timeout ?? 600).toFixed(1)}`, '', '[verifier]'];
  lines.push(`timeout_sec = ${(served.harbor?.verifierTimeoutSec ?? 120).toFixed(1)}`);
  const env = Object.entries(served.harbor?.env ?? {});
  if (env.length > 0) lines.push(`env = { ${env.map(([k, v]) => `${JSON.stringify(k)} = ${JSON.stringify(v)}`).join(', ')} }`);
  lines.push('', '[environment]', `allow_internet = ${runtime.allowInternet}`);
  if (runtime.cpus !== undefined) lines.push(`cpus = ${runtime.cpus}`);
  if (runtime.memoryMb !== undefined) lines.push(`memory_mb = ${runtime.memoryMb}`);
  return `${lines.join('\n')}\n`;
}

/** A value inside a Dockerfile's double quotes, taken literally: Docker unescapes \\ \" and \$ there, and expands $ otherwise. */
function dockerQuoted(s: string): string {
  return s.replace(/[\\"$]/g, (c) => `\\${c}`);
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

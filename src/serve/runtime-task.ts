import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { invalidTasksText, readHarborSuite } from '../rollout/harbor/load.js';
import type { RolloutTask } from '../rollout/task-file.js';
import type { ServedTask } from './request.js';
import type { ServedRuntime } from './runtime.js';

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
export function writeRuntimeTask(served: ServedTask, dir: string): RolloutTask {
  const runtime = served.runtime!;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'environment'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'tests'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'environment', 'Dockerfile'), dockerfile(runtime, dir));
  fs.writeFileSync(path.join(dir, 'instruction.md'), `${served.task.prompt}\n`);
  fs.writeFileSync(path.join(dir, 'task.toml'), taskToml(served));
  if (served.harbor) {
    const tests = path.resolve(served.harbor.testsDir);
    if (!fs.statSync(tests, { throwIfNoEntry: false })?.isDirectory())
      throw unsupported(
        ['evaluator', 'config', 'tests_dir'],
        `${tests} is not a folder on this machine (the harbor evaluator's tests_dir is read where polar serve runs)`,
      );
    fs.cpSync(tests, path.join(dir, 'tests'), { recursive: true });
  } else fs.writeFileSync(path.join(dir, 'tests', 'test.sh'), '#!/bin/sh\n# session_completed scores this task; no test runs.\nexit 0\n');
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

/** A 400 naming the request's field, as request.ts refuses (the service answers it in that shape). */
export function unsupported(loc: (string | number)[], msg: string): PolarError {
  return Object.assign(new PolarError('POLAR_USAGE', msg, 400), { loc });
}

/** FROM the image; ENV the runtime's variables; each prepare step in order (an upload a COPY from the folder, an exec a RUN in its cwd with its env); WORKDIR last. */
function dockerfile(runtime: ServedRuntime, dir: string): string {
  const lines = [`FROM ${runtime.image}`];
  for (const [key, value] of Object.entries(runtime.env)) lines.push(`ENV ${key}=${JSON.stringify(value)}`);
  runtime.prepare.forEach((step, i) => {
    if ('upload' in step) {
      const source = path.resolve(step.upload);
      if (!fs.existsSync(source))
        throw unsupported(['runtime', 'prepare', i, 'source'], `${source} is not on this machine (an upload's source is read where polar serve runs)`);
      const name = `upload-${i}`;
      fs.cpSync(source, path.join(dir, 'environment', name), { recursive: true });
      lines.push(`COPY ${JSON.stringify([name, step.target])}`);
    } else {
      const env = Object.entries(step.env).map(([k, v]) => `export ${k}=${shellQuote(v)}; `);
      lines.push(`RUN ${JSON.stringify(['/bin/sh', '-c', `mkdir -p ${shellQuote(step.cwd)} && cd ${shellQuote(step.cwd)} && ${env.join('')}${step.exec}`])}`);
    }
  });
  if (runtime.workdir) lines.push(`WORKDIR ${runtime.workdir}`);
  return `${lines.join('\n')}\n`;
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

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

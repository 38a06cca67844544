import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCommand } from '../core/process/command.js';
import { bwrapProblem, findBwrap } from '../sandbox/find.js';

/**
 * What `polar train` checks before anything slow starts, each problem with the fix in its message.
 * Missing hardware or tools (`nvidia-smi`, `uv`, the Python the checkout pins) and a missing checkout
 * are errors for a real run and warnings for `--dry-run`, which only writes files; a wrong checkout,
 * sizes that cannot work, and an unreadable model path are errors always.
 */
export interface Preflight {
  errors: string[];
  warnings: string[];
  /** What was found, for the view: GPU names, uv version, the Python version pinned. */
  gpus: string[];
  uv: string | null;
  python: string | null;
}

export interface PreflightInput {
  nemoRl: string;
  /** Files the run needs in the checkout (script and base config). */
  needs: string[];
  model: string;
  gpus: number;
  dryRun: boolean;
  env: Record<string, string>;
  /** Batch checks: the group size must divide the global batch. */
  groupSize?: number;
  globalBatch?: number;
  tasks?: number;
  promptsPerStep?: number;
  /** GRPO: the sandbox the agent will run every sample in; bwrap is probed here, not first in the agent. */
  sandbox?: 'bwrap' | 'none';
}

export async function preflight(input: PreflightInput): Promise<Preflight> {
  const errors: string[] = [];
  const warnings: string[] = [];
  const soft = (message: string) => (input.dryRun ? warnings : errors).push(message);
  const out: Preflight = { errors, warnings, gpus: [], uv: null, python: null };

  const smi = await runCommand('nvidia-smi', ['--query-gpu=name,memory.total', '--format=csv,noheader'], { env: input.env, timeoutMs: 15_000 });
  out.gpus = smi.failed || smi.exitCode !== 0 ? [] : smi.stdout.trim().split('\n').filter(Boolean);
  // nvidia-smi lists every GPU; CUDA_VISIBLE_DEVICES, when the user set it, says which are theirs.
  const visible = visibleDevices(input.env);
  const available = visible ? visible.length : out.gpus.length;
  const where = visible ? `CUDA_VISIBLE_DEVICES=${input.env.CUDA_VISIBLE_DEVICES} names` : 'nvidia-smi lists';
  if (out.gpus.length === 0) soft('no NVIDIA GPU: `nvidia-smi` did not list one (NeMo-RL trains on CUDA; install the NVIDIA driver, or run on a GPU machine)');
  else if (available < input.gpus) soft(`--gpus ${input.gpus}, but ${where} ${available}: ${out.gpus.join('; ')}`);
  else if (available > input.gpus)
    // --gpus stays 1 by default: NeMo-RL splits each step's batch evenly over the data-parallel
    // ranks (batched_data_dict.py:541), in whole micro-batches when sequence packing is off (:1011),
    // so a small batch (the README's 2 prompts × 4) cannot be spread over a whole node unasked; the
    // batch-split check (nemo-rl/batch-split.ts) judges a given --gpus against the merged config.
    warnings.push(
      `this run trains on ${input.gpus} of the ${available} GPUs ${where} (--gpus ${input.gpus}): pass --gpus ${available} to use them all; NeMo-RL splits each step's batch (prompts × group size for GRPO) evenly over them (and, with sequence packing off, in whole micro-batches of policy.train_micro_batch_size), which preflight checks`,
    );

  const uv = await runCommand('uv', ['--version'], { env: input.env, timeoutMs: 15_000 });
  out.uv = uv.failed || uv.exitCode !== 0 ? null : uv.stdout.trim();
  if (!out.uv) soft('no `uv` on PATH: NeMo-RL runs everything through uv (install it: `curl -LsSf https://astral.sh/uv/install.sh | sh`, or `pip install uv`)');

  if (!fs.existsSync(input.nemoRl)) {
    const clone = `clone it with \`git clone --recursive https://github.com/NVIDIA-NeMo/RL ${input.nemoRl}\``;
    // A dry run is how one looks at what polar would write before installing NeMo-RL: it writes the
    // files, but cannot say whether they merge and run.
    if (input.dryRun)
      warnings.push(
        `no NeMo-RL checkout at ${input.nemoRl}: the config is written but not merged with NeMo-RL's base config nor checked against it; ${clone} before a real run`,
      );
    else errors.push(`no NeMo-RL checkout at ${input.nemoRl}: ${clone}`);
  } else {
    for (const need of input.needs) {
      if (!fs.existsSync(path.join(input.nemoRl, need)))
        errors.push(`${input.nemoRl} has no ${need}: is it a NeMo-RL checkout (v0.7 or newer)? \`git -C ${input.nemoRl} pull\` or clone it again`);
    }
    const pinned = path.join(input.nemoRl, '.python-version');
    out.python = fs.existsSync(pinned) ? fs.readFileSync(pinned, 'utf8').trim() : null;
    if (out.python && out.uv) {
      const found = await runCommand('uv', ['python', 'find', out.python], { env: input.env, cwd: input.nemoRl, timeoutMs: 30_000 });
      if (found.failed || found.exitCode !== 0) soft(`the checkout pins Python ${out.python} and uv cannot find it: \`uv python install ${out.python}\``);
    }
  }

  if (input.sandbox === 'bwrap') {
    // The agent makes a sandbox only once NeMo-RL has loaded the model and started NeMo Gym; a bwrap
    // that is installed but cannot make one (user namespaces blocked, as on many GPU nodes) would
    // fail every sample then. Probed now, with the namespaces the agent uses (sandbox/find.ts).
    const bwrap = findBwrap(input.env.PATH);
    const problem = bwrap ? bwrapProblem(bwrap) : null;
    if (!bwrap) soft('--sandbox bwrap needs bubblewrap on PATH (Debian: apt-get install bubblewrap)');
    else if (problem)
      soft(
        `bubblewrap (${bwrap}) cannot make a sandbox on this machine: ${problem}. Every sample runs in one, so nothing would train: allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), or run on a node that allows them`,
      );
  }
  if (input.groupSize !== undefined && input.globalBatch !== undefined && input.globalBatch % input.groupSize !== 0) {
    errors.push(
      `policy.train_global_batch_size ${input.globalBatch} is not a multiple of the group size ${input.groupSize}: a GRPO group must not straddle two optimizer batches (leave it to polar: prompts × group size)`,
    );
  }
  if (input.tasks !== undefined && input.promptsPerStep !== undefined && input.tasks < input.promptsPerStep) {
    errors.push(
      `the task file has ${input.tasks} task${input.tasks === 1 ? '' : 's'} but --prompts-per-step is ${input.promptsPerStep}: each step takes that many distinct tasks (NeMo-RL drops an incomplete batch), so no step would run`,
    );
  }
  if (looksLikePath(input.model)) {
    const dir = input.model.startsWith('~') ? path.join(os.homedir(), input.model.slice(1)) : path.resolve(input.model);
    if (!fs.existsSync(path.join(dir, 'config.json')))
      errors.push(
        `--model ${input.model}: no readable Hugging Face model there (no config.json); give the folder with the weights, or a hub id like Qwen/Qwen3-0.6B`,
      );
  }
  return out;
}

function looksLikePath(model: string): boolean {
  return model.startsWith('/') || model.startsWith('./') || model.startsWith('../') || model.startsWith('~');
}

/** The devices CUDA_VISIBLE_DEVICES names (set and not empty), else null: polar trains on the first --gpus of them. */
export function visibleDevices(env: Record<string, string | undefined>): string[] | null {
  const list = (env.CUDA_VISIBLE_DEVICES ?? '')
    .split(',')
    .map((d) => d.trim())
    .filter(Boolean);
  return list.length > 0 ? list : null;
}

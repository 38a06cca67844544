import { composePlan } from '../environments/box/services.js';
import type { EnvironmentName } from '../environments/names.js';
import { composeFile } from '../harbor/features.js';
import type { HarborTrial } from '../harbor/types.js';
import type { RolloutTask } from '../task-file.js';

/**
 * What keeps polar from running a task as written, known from the task itself before anything
 * runs. A run of the task otherwise is no evidence that it is broken (nor valid), so the verdict is
 * `unverifiable` (this machine, or this environment, lacks it) or `unsupported` (polar does not
 * implement it yet), each naming the feature; verdict.ts decides. Line numbers are Harbor's source
 * at the fork snapshot 15735640198/harbor f276a3b.
 */
export interface NotAsWritten {
  /** What this machine or environment lacks, each with the way out. */
  unverifiable: string[];
  /** Harbor features polar does not implement yet, by name. */
  unsupported: string[];
}

/**
 * A Dockerfile step that fetches over the network at build time (a clone, a download): on the host,
 * which runs no RUN step, what it fetched is missing from the starting state. Installing packages
 * is not counted: the host's tools stand in for the image's, and a missing one says so by name.
 */
const BUILD_FETCH =
  /\bgit\s+(clone|fetch|pull|submodule\s+update)\b|\bcurl\b|\bwget\b|\bhuggingface-cli\s+download\b|\bhf\s+download\b|\(a URL: fetched by the image build only\)/;

/** Everything that keeps `task` from running as written in `environment`. */
export function notAsWritten(task: RolloutTask, environment: EnvironmentName): NotAsWritten {
  const h = task.harbor;
  const out: NotAsWritten = { unverifiable: [], unsupported: [] };
  if (!h) return out;
  if (environment === 'host') hostShortfalls(h, out);
  else boxShortfalls(h, out);
  const gpu = gpuNeed(h);
  if (gpu) out.unverifiable.push(gpu);
  if (h.tpu) out.unverifiable.push(`it needs a TPU ([environment].tpu = ${h.tpu}): polar gives a sample no TPU on this machine`);
  if (h.environmentEnv && environment === 'host')
    out.unsupported.push(
      `[environment].env (${Object.keys(h.environmentEnv).join(', ')}): Harbor sets these for every command in the environment (environments/base.py:218-221); the host environment does not yet (a container gets them)`,
    );
  if (h.windows) out.unsupported.push('[environment].os = "windows": polar runs Linux containers and the Linux host only');
  if (h.skillsDir) out.unsupported.push(`[environment].skills_dir = ${JSON.stringify(h.skillsDir)}: polar does not copy skills to the agent yet`);
  for (const list of h.allowlists ?? [])
    out.unsupported.push(
      `[${list.table}] network_mode = "allowlist" (allowed_hosts: ${list.hosts.join(', ') || 'none'}): polar cannot reach hosts by name yet, so that phase ran with no network`,
    );
  for (const step of h.steps ?? []) out.unsupported.push(...(step.unsupported ?? []));
  return out;
}

/** What the host environment does not apply: users, a separate verifier's image, build-time fetches, MCP servers. */
function hostShortfalls(h: HarborTrial, out: NotAsWritten): void {
  const podman = '--environment podman (or docker) runs it as written';
  if (h.agentUser !== undefined)
    out.unverifiable.push(`[agent].user = ${JSON.stringify(h.agentUser)}: the host environment runs the agent as this machine's user; ${podman}`);
  if (h.verifierUser !== undefined)
    out.unverifiable.push(`[verifier].user = ${JSON.stringify(h.verifierUser)}: the host environment runs the verifier as this machine's user; ${podman}`);
  if (h.verifierMode === 'separate') {
    const image = h.separateVerifier?.image ?? (h.separateVerifier?.dockerfile ? "tests/Dockerfile's image" : "[environment]'s image");
    out.unverifiable.push(
      `its separate verifier environment (environment_mode = "separate"): the host environment runs the verifier with this machine's tools, not ${image}; ${podman}`,
    );
  }
  const fetches = (h.skipped ?? []).filter((line) => BUILD_FETCH.test(line));
  if (fetches.length > 0)
    out.unverifiable.push(
      `environment/Dockerfile fetches over the network while the image builds (${fetches.map((f) => f.slice(0, 120)).join('; ')}): the host environment runs no RUN step, so what it fetches is not in the workspace; ${podman}`,
    );
  if (h.mcpServers && h.mcpServers.length > 0)
    out.unsupported.push(`[[environment.mcp_servers]] (${h.mcpServers.map((s) => s.name).join(', ')}): the host environment gives the agent no MCP server yet`);
}

/**
 * What a box provider does not run as written: a compose file polar refuses part of (the refusal
 * names the service and key), MCP servers (their compose services run; the harness is not given them).
 */
function boxShortfalls(h: HarborTrial, out: NotAsWritten): void {
  try {
    if (composeFile(h.dir ?? '')) composePlan(h);
  } catch (err) {
    out.unsupported.push((err as Error).message);
  }
  if (h.mcpServers && h.mcpServers.length > 0)
    out.unsupported.push(
      `[[environment.mcp_servers]] (${h.mcpServers.map((s) => s.name).join(', ')}): polar does not give the agent's harness MCP servers yet (the services behind them run)`,
    );
}

/**
 * `gpus >= 1` or `gpu_types` (config.py:341-346): Harbor refuses such a task on a machine without
 * GPUs, and polar gives a sample none on any machine yet.
 */
function gpuNeed(h: HarborTrial): string | null {
  if ((h.gpus ?? 0) < 1 && !h.gpuTypes) return null;
  const asked = [...(h.gpus !== undefined ? [`gpus = ${h.gpus}`] : []), ...(h.gpuTypes ? [`gpu_types = ${JSON.stringify(h.gpuTypes)}`] : [])].join(', ');
  return `it needs a GPU ([environment] ${asked}): polar gives a sample no GPU on this machine, so the task was not run as written (Harbor refuses it on a machine without GPUs)`;
}

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RolloutTask } from '../task-file.js';
import type { HarborStep, HarborTrial } from '../harbor/types.js';
import { notAsWritten } from './as-written.js';
import { judgeTask, type RunEvidence, settleVerdict, type VerdictContext } from './verdict.js';

/**
 * Each verdict word means one thing (issue 41, item 3): broken only on evidence from a run of the
 * task as written; unverifiable whenever polar could not run it as written here, naming what; and
 * unsupported for a Harbor feature polar does not implement yet, by name. (invalid is the loader's:
 * load.test.ts, steps.test.ts.)
 */
function task(harbor: Partial<HarborTrial> = {}): RolloutTask {
  return {
    id: 't',
    prompt: 'x',
    workspace: { empty: true },
    setup: [],
    evaluator: { type: 'harbor', timeout: 30 },
    timeout: null,
    metadata: {},
    harbor: { name: 'o/t', baseImage: 'debian:12-slim', verifierNetwork: 'none', agentNetwork: 'none', skipped: [], artifacts: [], ...harbor } as HarborTrial,
  } as RolloutTask;
}

const run = (r: Partial<RunEvidence> = {}): RunEvidence => ({
  outcome: 'completed',
  reward: 0,
  error: null,
  errorStage: null,
  forfeit: null,
  output: '',
  verifierFiles: null,
  needsRewardKey: null,
  ...r,
});
const host: VerdictContext = { environment: 'host', verifierNetwork: 'none' };
const podman: VerdictContext = { environment: 'podman', verifierNetwork: 'none' };
/** The host's oracle missed: as written, that would be broken. */
const missed = run({ reward: 0 });
const step = (name: string, unsupported: string[]): HarborStep =>
  ({
    name,
    instruction: 'x',
    testsDir: null,
    solutionDir: null,
    agentTimeoutSec: null,
    verifierTimeoutSec: 30,
    verifierEnv: {},
    minReward: null,
    workdirDir: null,
    artifacts: [],
    unsupported,
  }) as HarborStep;

describe('verdict words', () => {
  it('valid: run as written, the oracle reaches the top reward and nop earns nothing', () => {
    expect(judgeTask(task(), run({ reward: 1 }), run(), podman)).toMatchObject({ verdict: 'valid', asWritten: true, unsupported: [], unverifiable: [] });
  });

  it('broken: the evidence of a run as written (the same user task under podman, whose image applies the user)', () => {
    const v = judgeTask(task({ agentUser: 'agent' }), missed, run(), podman);
    expect(v.verdict).toBe('broken');
    expect(v.problems[0]).toMatch(/the oracle \(solution\/solve\.sh\) earned 0, not the top reward 1/);
  });

  it('unverifiable on the host, never broken: an agent or verifier user, named, with the way out', () => {
    const v = judgeTask(task({ agentUser: 'agent', verifierUser: '1001' }), missed, run({ reward: 1 }), host);
    expect(v.verdict).toBe('unverifiable');
    expect(v.problems).toEqual([]);
    expect(v.unverifiable[0]).toBe(
      '[agent].user = "agent": the host environment runs the agent as this machine\'s user; --environment podman (or docker) runs it as written',
    );
    expect(v.unverifiable[1]).toMatch(/^\[verifier\]\.user = "1001": the host environment runs the verifier as this machine's user/);
    // What the run showed is kept, said as no evidence.
    expect(v.unverifiable).toContainEqual(expect.stringMatching(/^seen on a run not as written, so no evidence: the oracle .* earned 0/));
    expect(v.unverifiable).toContainEqual(expect.stringMatching(/^seen on a run not as written, so no evidence: doing nothing \(nop\) already earns 1/));
    // Even a run that passed is no evidence that the task as written is sound.
    expect(judgeTask(task({ agentUser: 'agent' }), run({ reward: 1 }), run(), host).verdict).toBe('unverifiable');
  });

  it("unverifiable on the host: a separate verifier's image, named", () => {
    const separate = task({
      verifierMode: 'separate',
      separateVerifier: { context: '/t/tests', dockerfile: '/t/tests/Dockerfile', image: null, inherited: true, workdir: null, network: 'none' },
    });
    const v = judgeTask(separate, missed, run(), host);
    expect(v.verdict).toBe('unverifiable');
    expect(v.unverifiable[0]).toMatch(
      /^its separate verifier environment \(environment_mode = "separate"\): .*not tests\/Dockerfile's image; --environment podman/,
    );
    expect(judgeTask(separate, missed, run(), podman).verdict).toBe('broken');
  });

  it('unverifiable on the host: a Dockerfile that fetches while the image builds (git clone, a download), named; a package install is not counted', () => {
    const clone = task({ skipped: ['RUN apt-get install -y git', 'RUN git clone https://github.com/o/r /app/r'] });
    const v = judgeTask(clone, missed, run(), host);
    expect(v.verdict).toBe('unverifiable');
    expect(v.unverifiable[0]).toMatch(
      /^environment\/Dockerfile fetches over the network while the image builds \(RUN git clone https:\/\/github\.com\/o\/r \/app\/r\)/,
    );
    expect(v.unverifiable[0]).not.toMatch(/apt-get/);
    expect(notAsWritten(task({ skipped: ['RUN pip install pytest'] }), 'host')).toEqual({ unverifiable: [], unsupported: [] });
    expect(judgeTask(clone, missed, run(), podman).verdict).toBe('broken');
  });

  it('unverifiable in every environment: a GPU (gpus >= 1, or gpu_types), with the word GPU', () => {
    for (const ctx of [host, podman]) {
      const v = judgeTask(task({ gpus: 1 }), run({ reward: 1 }), run(), ctx);
      expect(v.verdict).toBe('unverifiable');
      expect(v.unverifiable[0]).toMatch(/^it needs a GPU \(\[environment\] gpus = 1\): polar gives a sample no GPU/);
    }
    expect(judgeTask(task({ gpuTypes: ['H100'] }), missed, run(), podman).unverifiable[0]).toMatch(/GPU.*gpu_types = \["H100"\]/);
  });

  it('unsupported: a Harbor feature polar does not implement yet, by name (an allowlist, MCP servers on the host, a step feature)', () => {
    const allow = judgeTask(task({ allowlists: [{ table: 'environment', hosts: ['pypi.org'] }] }), missed, run(), podman);
    expect(allow.verdict).toBe('unsupported');
    expect(allow.unsupported).toEqual([
      '[environment] network_mode = "allowlist" (allowed_hosts: pypi.org): polar cannot reach hosts by name yet, so that phase ran with no network',
    ]);
    expect(allow.problems).toEqual([]);
    const mcp = task({ mcpServers: [{ name: 'fs', transport: 'stdio', command: 'mcp-fs', args: [] }] });
    expect(judgeTask(mcp, run({ reward: 1 }), run(), host)).toMatchObject({
      verdict: 'unsupported',
      unsupported: ['[[environment.mcp_servers]] (fs): the host environment gives the agent no MCP server yet'],
    });
    const steps = task({ steps: [step('a', []), step('b', ['step b\'s own verifier user (steps[1].verifier.user = "grader")'])] });
    const refused = "task o/t: step b's own verifier user: not supported by polar yet in a multi-step task, so its steps are not run otherwise";
    const v = judgeTask(
      steps,
      run({ outcome: 'error', errorStage: 'init', error: refused, reward: null }),
      run({ outcome: 'error', errorStage: 'init', error: refused, reward: null }),
      podman,
    );
    expect(v.verdict).toBe('unsupported');
    // Named once, from the task: the samples' refusal says the same.
    expect(v.unsupported).toEqual(['step b\'s own verifier user (steps[1].verifier.user = "grader")']);
  });

  it('unsupported: [environment].env on the host (a container gets it), a Windows os, skills_dir; unverifiable: a TPU', () => {
    const env = task({ environmentEnv: { GREETER: 'hi' } });
    expect(judgeTask(env, run({ reward: 1 }), run(), podman)).toMatchObject({ verdict: 'valid', unsupported: [] });
    expect(judgeTask(env, run({ reward: 1 }), run(), host).unsupported).toEqual([
      '[environment].env (GREETER): Harbor sets these for every command in the environment (environments/base.py:218-221); the host environment does not yet (a container gets them)',
    ]);
    const v = judgeTask(task({ windows: true, skillsDir: '/skills', tpu: 'v6e 2x4' }), run({ reward: 1 }), run(), podman);
    expect(v.verdict).toBe('unsupported');
    expect(v.unsupported).toEqual([
      '[environment].os = "windows": polar runs Linux containers and the Linux host only',
      '[environment].skills_dir = "/skills": polar does not copy skills to the agent yet',
    ]);
    expect(v.unverifiable).toEqual(['it needs a TPU ([environment].tpu = v6e 2x4): polar gives a sample no TPU on this machine']);
  });

  it('in a container: MCP servers unsupported by name; a compose file polar refuses part of is unsupported, naming the service and key', () => {
    const mcp = task({ mcpServers: [{ name: 'mcp-server', transport: 'streamable-http', url: 'http://mcp-server:8000/mcp', args: [] }] });
    expect(judgeTask(mcp, run({ reward: 1 }), run(), podman)).toMatchObject({
      verdict: 'unsupported',
      unsupported: ["[[environment.mcp_servers]] (mcp-server): polar does not give the agent's harness MCP servers yet (the services behind them run)"],
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-verdict-compose-'));
    try {
      fs.mkdirSync(path.join(dir, 'environment'));
      fs.writeFileSync(path.join(dir, 'environment', 'docker-compose.yaml'), 'services:\n  db:\n    image: postgres:16\n    volumes: ["./data:/data"]\n');
      const v = judgeTask(task({ dir }), missed, run(), podman);
      expect(v.verdict).toBe('unsupported');
      expect(v.unsupported).toEqual(['docker-compose.yaml: service db: `volumes` is not supported by polar yet']);
      expect(v.problems).toEqual([]);
      // Compose with [[steps]], or a shared verifier whose network differs from the agent's: refused by name.
      fs.writeFileSync(path.join(dir, 'environment', 'docker-compose.yaml'), 'services:\n  db:\n    image: postgres:16\n');
      expect(judgeTask(task({ dir, steps: [step('a', [])] }), run({ reward: 1 }), run(), podman).unsupported).toEqual([
        'docker-compose.yaml with [[steps]]: a multi-step task with compose services is not supported by polar yet',
      ]);
      expect(judgeTask(task({ dir, agentNetwork: 'public', verifierNetwork: 'none' }), run({ reward: 1 }), run(), podman).unsupported[0]).toMatch(
        /an agent and a shared verifier with different networks are not supported by polar yet/,
      );
      // A compose file polar runs whole is no gap: the run is evidence.
      fs.writeFileSync(path.join(dir, 'environment', 'docker-compose.yaml'), 'services:\n  db:\n    image: postgres:16\n');
      expect(judgeTask(task({ dir }), run({ reward: 1 }), run(), podman)).toMatchObject({ verdict: 'valid', unsupported: [] });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a forgery that wins is broken however the task ran (training runs it the same way); the oracle's miss is evidence only as written", () => {
    const judged = judgeTask(task({ agentUser: 'agent' }), missed, run(), host);
    const settled = settleVerdict({ ...judged, problems: [...judged.problems, 'hackable: forge:x earns 1 without solving it'] });
    expect(settled).toMatchObject({ verdict: 'broken', problems: ['hackable: forge:x earns 1 without solving it'] });
    expect(settled.unverifiable.some((u) => u.startsWith('seen on a run not as written, so no evidence: '))).toBe(true);
    const escaped = settleVerdict({ ...judged, problems: ['escapes its group: forge:bomb ends error (x) where it must score 0 (y)'] });
    expect(escaped.verdict).toBe('broken');
    expect(settleVerdict({ ...judged }).verdict).toBe('unverifiable');
    const asWritten = judgeTask(task(), run({ reward: 1 }), run(), podman);
    expect(settleVerdict({ ...asWritten, problems: ['hackable: forge:x'] }).verdict).toBe('broken');
  });
});

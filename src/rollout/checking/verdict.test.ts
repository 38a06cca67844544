import { describe, expect, it } from 'vitest';
import type { RolloutTask } from '../task-file.js';
import type { HarborTrial } from '../harbor/types.js';
import { judgeTask, type RunEvidence, type VerdictContext } from './verdict.js';

/** A Harbor task as far as the verdict reads it: its network setting, base image and metadata. */
function task(harbor: Partial<HarborTrial> = {}, metadata: Record<string, unknown> = {}): RolloutTask {
  return {
    id: 't',
    prompt: 'x',
    workspace: { empty: true },
    setup: [],
    evaluator: { type: 'harbor', timeout: 30 },
    timeout: null,
    metadata,
    harbor: { name: 't', baseImage: 'python:3.12-slim', verifierNetwork: null, agentNetwork: null, ...harbor } as HarborTrial,
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
const solved = run({ reward: 1 });
const host: VerdictContext = { environment: 'host', verifierNetwork: 'none' };
const podman: VerdictContext = { environment: 'podman', verifierNetwork: 'none' };

describe('a task verdict: broken only where the evidence says the task is wrong', () => {
  it('valid: the oracle reaches its top reward and nop earns nothing', () => {
    expect(judgeTask(task(), solved, run(), host)).toEqual({ verdict: 'valid', problems: [], unverifiable: [], unsupported: [], asWritten: true });
    expect(judgeTask(task({}, { max_reward: 3 }), run({ reward: 3 }), run(), { ...host, rewardRange: [0, 3] }).verdict).toBe('valid');
  });

  it('unverifiable, with the flag to pass: a task scored outside the reward range (reward-range.ts)', () => {
    // Its [metadata].max_reward above the range: every sample would forfeit, the oracle's too.
    const above = judgeTask(
      task({}, { max_reward: 3 }),
      run({ forfeit: 'the evaluator gave a reward the rollout does not take: its reward 3 is outside the reward range [0, 1]' }),
      run(),
      host,
    );
    expect(above).toMatchObject({ verdict: 'unverifiable', problems: [] });
    expect(above.unverifiable).toEqual([
      "its top reward ([metadata].max_reward) 3 is above the reward range [0, 1]: pass --reward-range 0,3 (or the task's own scale) to check it",
    ]);
    // No max_reward, but the oracle's verifier scores 100: said with the forfeit, not as a missed top reward.
    const forfeit =
      'the evaluator gave a reward the rollout does not take: its reward 100 is outside the reward range [0, 1] (a task scored on another scale: --reward-range LO,HI)';
    const scaled = judgeTask(task(), run({ forfeit }), run(), host);
    expect(scaled).toMatchObject({ verdict: 'unverifiable', problems: [] });
    expect(scaled.unverifiable[0]).toMatch(
      /^its verifier scores outside the reward range \[0, 1\] \(the oracle: .*reward 100 is outside.*\): pass --reward-range LO,HI/,
    );
  });

  it('broken: an oracle that ran and missed, a nop that earns; the hint only where the network can explain it', () => {
    const missed = judgeTask(task({ verifierNetwork: 'none' }), run({ output: 'answer.txt holds: 41' }), run(), host);
    expect(missed).toMatchObject({ verdict: 'broken', unverifiable: [] });
    expect(missed.problems).toEqual(['the oracle (solution/solve.sh) earned 0, not the top reward 1']);
    // task.toml silent and no network given: the hint rides along, the verdict stays broken (no network evidence).
    const silent = judgeTask(task(), run({ output: 'answer.txt holds: 41' }), run(), host);
    expect(silent.verdict).toBe('broken');
    expect(silent.problems[0]).toMatch(/earned 0, not the top reward 1 \(the verifier had no network: .*--network host/);
    expect(judgeTask(task(), solved, run({ reward: 0.5 }), host).problems).toEqual(['doing nothing (nop) already earns 0.5']);
    // A nop that earns is the task's fault even where the oracle could not be judged.
    const both = judgeTask(task(), run({ output: 'curl: (6) Could not resolve host: astral.sh' }), run({ reward: 1 }), host);
    expect(both.verdict).toBe('broken');
  });

  it('unverifiable: a verifier that needs the network it did not have, with --network host as the way out', () => {
    const dns = run({
      forfeit: 'the verifier wrote no reward',
      verifierFiles: {
        'test-stdout.txt': 'error: Failed to fetch\n  Caused by: dns error: failed to lookup address information: Temporary failure in name resolution\n',
      },
    });
    const v = judgeTask(task(), dns, run(), podman);
    expect(v.verdict).toBe('unverifiable');
    expect(v.problems).toEqual([]);
    expect(v.unverifiable[0]).toMatch(/^its verifier needs the network \(".*Temporary failure in name resolution"\): .*--network host gives Harbor's default$/);
    // A verifier that timed out with no network, in a task that does not forbid it: pip retrying.
    expect(judgeTask(task(), run({ forfeit: 'the verifier (tests/test.sh) timed out after 30 s' }), run(), podman).verdict).toBe('unverifiable');
    // With the network given (task allows it) but unreachable from this machine: a different way out.
    const offline = judgeTask(task({ verifierNetwork: 'public' }), run({ output: 'pip: NewConnectionError(...): Name or service not known' }), run(), {
      ...podman,
      verifierNetwork: 'host',
    });
    expect(offline.unverifiable[0]).toMatch(/could not reach the network from this machine.*where the internet is reachable/);
    // A task that forbids the internet and times out: its own fault.
    expect(judgeTask(task({ verifierNetwork: 'none' }), run({ forfeit: 'the verifier (tests/test.sh) timed out after 30 s' }), run(), podman).verdict).toBe(
      'broken',
    );
  });

  it("unverifiable: an image that cannot be pulled or built, with the engine's reason; a start that failed for the machine's reason", () => {
    const pull = run({
      outcome: 'error',
      reward: null,
      errorStage: 'init',
      error:
        "podman build of /t/environment failed (exit 125): Error: creating build container: initializing source docker://python:3.12-slim: pinging container registry registry-1.docker.io: dial tcp: lookup registry-1.docker.io: no such host (--environment host runs the task in polar's sandbox without its image)\nSTEP 1/2 …",
    });
    const v = judgeTask(task(), pull, pull, podman);
    expect(v).toMatchObject({ verdict: 'unverifiable', problems: [] });
    expect(v.unverifiable).toEqual([
      expect.stringMatching(
        /^neither the oracle nor nop could start: no network to pull python:3\.12-slim \(podman: Error: creating build container.*no such host\); `podman pull python:3\.12-slim`/,
      ),
    ]);
    const runStep = run({
      outcome: 'error',
      reward: null,
      errorStage: 'init',
      error: 'docker build of /t/environment failed (exit 1): ERROR: process "/bin/sh -c make" did not complete successfully: exit code: 2',
    });
    expect(judgeTask(task(), runStep, runStep, podman).unverifiable[0]).toMatch(/its image does not build here \(docker: ERROR: process .* exit code: 2\)/);
    const engine = run({ outcome: 'error', reward: null, errorStage: 'init', error: 'podman run polar-harbor/t:1 failed (exit 126): OCI runtime error' });
    expect(judgeTask(task(), engine, run(), podman)).toMatchObject({ verdict: 'unverifiable', problems: [] });
    const feature = run({
      outcome: 'error',
      reward: null,
      errorStage: 'init',
      error: 'task t needs a container engine: --environment podman (or docker). The host environment cannot run [environment.healthcheck]',
    });
    expect(judgeTask(task(), feature, feature, host).unverifiable[0]).toMatch(/needs a container engine.*not supported on this environment/);
    // An error while the oracle ran (not solve.sh failing, which the verifier grades): the machine's.
    const env = run({
      outcome: 'error',
      reward: null,
      errorStage: 'run',
      error: "task.toml sets SOLVER_KEY from $SOLVER_KEY, which is not set in polar's environment",
    });
    expect(judgeTask(task(), env, run(), host)).toMatchObject({
      verdict: 'unverifiable',
      unverifiable: [expect.stringMatching(/^the oracle could not run here: task.toml sets SOLVER_KEY/)],
    });
    // The task names a user its own image does not have: the task's fault.
    const user = run({ outcome: 'error', reward: null, errorStage: 'init', error: "task.toml's agent.user bob is not a user in the image: no such user" });
    expect(judgeTask(task(), user, user, podman).verdict).toBe('broken');
  });

  it("unverifiable on the host: a verifier missing a tool this machine lacks (the image would have it); the same in the task's own image is broken", () => {
    const missing = run({ output: '/tests/test.sh: line 3: uvx: command not found' });
    const v = judgeTask(task({ verifierNetwork: 'none' }), missing, run(), host);
    expect(v.verdict).toBe('unverifiable');
    expect(v.unverifiable[0]).toMatch(/lacks a tool on this machine \(".*uvx: command not found"\).*not python:3\.12-slim's.*--environment podman/);
    expect(judgeTask(task({ verifierNetwork: 'none' }), missing, run(), podman).verdict).toBe('broken');
  });

  it('a reward.json of several metrics and no "reward" asks for --reward-key instead of calling the task broken', () => {
    const v = judgeTask(task(), run({ forfeit: 'no reward', needsRewardKey: ['a', 'b'] }), run({ needsRewardKey: ['a', 'b'] }), host);
    expect(v).toMatchObject({ verdict: 'unverifiable', problems: [] });
    expect(v.unverifiable[0]).toMatch(/several metrics \(a, b\).*--reward-key/);
  });
});

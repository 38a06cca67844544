import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarE2e } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Harbor features that need the task's own container (issue 32, 2), on fixtures/harbor-features
 * (built FROM the local debian:12-slim, as .ci/podman makes it): a service started by the image's
 * ENTRYPOINT that a healthcheck waits for, and a multi-step task. `polar tasks check` under podman
 * must give each oracle its top reward and nop 0; the host environment refuses the service task by
 * name. The podman part is skipped, saying why, where `podman info` fails.
 */
const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/harbor-features');
const podman = workingEngines().includes('podman');
const bwrap = findBwrap();
const noBwrap = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);

interface Check {
  ok: boolean;
  results: {
    task: string;
    ok: boolean;
    problems: string[];
    oracle: { reward: number | null; error: string | null };
    nop: { reward: number | null; error: string | null };
  }[];
}

async function tasksCheck(task: string, environment: string): Promise<{ code: number; check: Check; stderr: string }> {
  const r = await polarE2e(['tasks', 'check', path.isAbsolute(task) ? task : path.join(FIXTURES, task), '--environment', environment, '--no-forge', '--json']);
  return { code: r.code, check: JSON.parse(r.stdout) as Check, stderr: r.stderr };
}

describe.skipIf(!podman)(`Harbor features in podman${podman ? '' : ' (skipped: `podman info` fails here)'}`, () => {
  it(
    'the healthcheck waits for the ENTRYPOINT service before the agent and before the verifier: oracle 1, nop 0',
    async () => {
      const { code, check, stderr } = await tasksCheck('healthcheck-service', 'podman');
      const [r] = check.results;
      expect(r?.oracle, stderr).toMatchObject({ reward: 1, error: null });
      expect(r?.nop).toMatchObject({ reward: 0, error: null });
      expect(code).toBe(0);
    },
    patient(300_000),
  );

  it(
    'a healthcheck that never passes ends the sample in error before the agent, with the reason (no reward of 0)',
    async () => {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-unhealthy-'));
      try {
        const task = path.join(root, 'healthcheck-service');
        fs.cpSync(path.join(FIXTURES, 'healthcheck-service'), task, { recursive: true });
        const toml = fs.readFileSync(path.join(task, 'task.toml'), 'utf8');
        fs.writeFileSync(
          path.join(task, 'task.toml'),
          toml
            .replace('command = "test -s /run/svc/answer"', 'command = "test -e /run/svc/never"')
            .replace('start_period_sec = 30', 'start_period_sec = 0')
            .replace('retries = 3', 'retries = 2'),
        );
        const { check, stderr } = await tasksCheck(task, 'podman');
        const [r] = check.results;
        for (const run of [r!.oracle, r!.nop]) {
          expect(run.reward, stderr).toBeNull();
          expect(run.error).toMatch(/healthcheck failed after 2 consecutive tries \(exit 1\): test -e \/run\/svc\/never/);
        }
      } finally {
        removeTree(root);
      }
    },
    patient(300_000),
  );

  it(
    "a multi-step task runs its steps in order in one container, each verified: oracle 1 (step 2 appends to step 1's file), nop 0",
    async () => {
      const { code, check, stderr } = await tasksCheck('multi-step', 'podman');
      const [r] = check.results;
      expect(r?.oracle, stderr).toMatchObject({ reward: 1, error: null });
      expect(r?.nop).toMatchObject({ reward: 0, error: null });
      expect(code).toBe(0);
    },
    patient(300_000),
  );
});

describe.skipIf(noBwrap !== null)(`Harbor features on the host${noBwrap ? ` (skipped: ${noBwrap})` : ''}`, () => {
  it(
    'the host refuses the service task by name, with the way out, before anything of it runs',
    async () => {
      const { check } = await tasksCheck('healthcheck-service', 'host');
      const [r] = check.results;
      for (const run of [r!.oracle, r!.nop]) {
        expect(run.reward).toBeNull();
        expect(run.error).toMatch(/task polar\/healthcheck-service needs a container engine: --environment podman/);
        expect(run.error).toMatch(/\[environment\.healthcheck\]/);
        expect(run.error).toMatch(/ENTRYPOINT/);
      }
    },
    patient(120_000),
  );

  it(
    'a multi-step task runs on the host too: oracle 1, nop 0',
    async () => {
      const { code, check, stderr } = await tasksCheck('multi-step', 'host');
      const [r] = check.results;
      expect(r?.oracle, stderr).toMatchObject({ reward: 1, error: null });
      expect(r?.nop).toMatchObject({ reward: 0, error: null });
      expect(code).toBe(0);
    },
    patient(120_000),
  );

  it(
    "the sample's reward is the mean of its steps' (Harbor's default): an oracle that fails step 2 earns 0.5",
    async () => {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-steps-'));
      try {
        const task = path.join(root, 'multi-step');
        fs.cpSync(path.join(FIXTURES, 'multi-step'), task, { recursive: true });
        fs.writeFileSync(path.join(task, 'steps', 'append-content', 'solution', 'solve.sh'), '#!/bin/bash\nprintf ", moon!" >> /app/hello.txt\n');
        const { check, stderr } = await tasksCheck(task, 'host');
        const [r] = check.results;
        expect(r?.oracle, stderr).toMatchObject({ reward: 0.5, error: null });
      } finally {
        removeTree(root);
      }
    },
    patient(120_000),
  );
});

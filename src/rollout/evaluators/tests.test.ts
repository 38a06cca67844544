import { describe, expect, it } from 'vitest';
import type { RolloutTask } from '../task-file.js';
import { exitStatusNotices, testRuns } from './tests.js';

const task = (id: string, evaluator: RolloutTask['evaluator']): RolloutTask => ({
  id,
  prompt: 'p',
  workspace: { empty: true },
  setup: [],
  evaluator,
  timeout: null,
  metadata: {},
});

describe('tests evaluator runs', () => {
  it('runs every named test once with a runner, and recognised commands through theirs', () => {
    const named = testRuns({ type: 'tests', runner: 'unittest', fail_to_pass: ['m.C.a'], pass_to_pass: ['m.C.b'], timeout: 60 });
    expect(named).toHaveLength(1);
    expect(named[0]).toMatchObject({
      runner: 'unittest',
      named: [
        { id: 'm.C.a', kind: 'fail_to_pass' },
        { id: 'm.C.b', kind: 'pass_to_pass' },
      ],
    });
    expect(named[0]!.command).toMatch(/^'python3' '-I' '-c' /);
    const mixed = testRuns({ type: 'tests', fail_to_pass: ['python3 -m unittest -q m.C.a'], pass_to_pass: ['npm test'], timeout: 60 });
    expect(mixed.map((r) => [r.label, r.runner])).toEqual([
      ['python3 -m unittest -q m.C.a', 'unittest'],
      ['npm test', null],
    ]);
  });

  it('names the tasks whose tests are graded by exit status before the rollout starts', () => {
    const notices = exitStatusNotices([
      task('npm', { type: 'tests', fail_to_pass: ['npm test'], pass_to_pass: [], timeout: 60 }),
      task('named', { type: 'tests', fail_to_pass: ['python3 -m unittest m.C.a'], pass_to_pass: [], timeout: 60 }),
      task('cmd', { type: 'command', command: 'node check.js', timeout: 60 }),
    ]);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/^notice: task npm: its tests evaluator grades "npm test" by exit status, .*"runner" \(pytest, unittest, node-test\)/);
  });
});

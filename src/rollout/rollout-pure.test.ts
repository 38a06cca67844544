import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAccept } from './accept.js';
import { commandReward } from './reward.js';
import { parseTaskFile } from './task-file.js';

const opts = { name: 'tasks.jsonl', baseDir: '/base' };
const task = (over: Record<string, unknown> = {}) =>
  JSON.stringify({ id: 't1', prompt: 'fix it', workspace: { empty: true }, evaluator: { type: 'session-completed' }, ...over });

describe('task file', () => {
  it('reads tasks, resolving relative workspace paths against the file and filling defaults', () => {
    const tasks = parseTaskFile(
      [
        task(),
        '',
        '# a comment',
        task({ id: 't2', workspace: { dir: 'repos/a' }, setup: ['npm i'], evaluator: { type: 'command', command: 'npm test' }, timeout: 60 }),
      ].join('\n'),
      opts,
    );
    expect(tasks.map((t) => t.id)).toEqual(['t1', 't2']);
    expect(tasks[1]).toMatchObject({
      workspace: { dir: path.resolve('/base/repos/a') },
      setup: ['npm i'],
      evaluator: { type: 'command', command: 'npm test', timeout: 300 },
      timeout: 60,
    });
    expect(tasks[0]).toMatchObject({ setup: [], timeout: null, metadata: {} });
  });

  it('names the line and field of every problem, all at once', () => {
    const text = [
      task(),
      task({ id: 't2', prompt: undefined }),
      task({ id: 't3', evaluator: { type: 'judge' } }),
      '{not json',
      task(),
      task({ id: 't6', workspace: { git: 'https://example.com/r.git' } }),
      task({ id: 't7', extra: 1 }),
    ].join('\n');
    let message = '';
    try {
      parseTaskFile(text, opts);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/6 problems; nothing was started/);
    expect(message).toMatch(/line 2, field "prompt": required/);
    expect(message).toMatch(/line 3, field "evaluator.type": unknown evaluator "judge"; use command, tests or session-completed/);
    expect(message).toMatch(/line 4: not valid JSON/);
    expect(message).toMatch(/line 5, field "id": duplicate id "t1" \(first on line 1\)/);
    expect(message).toMatch(/line 6, field "workspace.commit": required with "git"/);
    expect(message).toMatch(/line 7, field "extra": unknown field/);
  });

  it('reads named tests: a runner with test ids, a command graded by its JUnit report', () => {
    const [named, junit] = parseTaskFile(
      [
        task({ evaluator: { type: 'tests', runner: 'pytest', runner_args: ['-p', 'asyncio'], fail_to_pass: ['t.py::a'], pass_to_pass: ['t.py::b'] } }),
        task({ id: 't2', evaluator: { type: 'command', command: 'mvn test', report: { format: 'junit', tests: ['com.x.FooTest'] } } }),
      ].join('\n'),
      opts,
    );
    expect(named!.evaluator).toEqual({
      type: 'tests',
      runner: 'pytest',
      runner_args: ['-p', 'asyncio'],
      fail_to_pass: ['t.py::a'],
      pass_to_pass: ['t.py::b'],
      timeout: 300,
    });
    expect(junit!.evaluator).toMatchObject({ report: { format: 'junit', tests: ['com.x.FooTest'] } });
    let message = '';
    try {
      parseTaskFile(
        [
          task({ evaluator: { type: 'tests', runner: 'jest', fail_to_pass: ['a'] } }),
          task({ id: 't2', evaluator: { type: 'tests', runner_args: ['-x'], fail_to_pass: ['pytest a'] } }),
          task({ id: 't3', evaluator: { type: 'command', command: 'x', report: { format: 'tap', tests: ['a'] } } }),
        ].join('\n'),
        opts,
      );
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/line 1, field "evaluator.runner": one of pytest, unittest, node-test/);
    expect(message).toMatch(/line 2, field "evaluator.runner_args": .*with "runner" set/);
    expect(message).toMatch(/line 3, field "evaluator.report": \{"format": "junit"/);
  });

  it('checks that a workspace folder exists', () => {
    expect(() => parseTaskFile(task({ workspace: { dir: 'nowhere' } }), { ...opts, checkPaths: true })).toThrow(
      /field "workspace.dir": no such folder: \/base\/nowhere/,
    );
  });
});

describe('command evaluator reward', () => {
  it('a JSON number or {reward, trace_rewards} on the last line, else the exit status', () => {
    expect(commandReward('running tests\n0.75\n', 1)).toEqual({ reward: 0.75, traceRewards: null, details: null });
    expect(commandReward('{"reward": 1, "trace_rewards": [1, 0.5], "passed": 3}', 0)).toEqual({ reward: 1, traceRewards: [1, 0.5], details: { passed: 3 } });
    expect(commandReward('ok\n', 0)).toEqual({ reward: 1, traceRewards: null, details: null });
    expect(commandReward('FAILED 2 tests\n', 3)).toEqual({ reward: 0, traceRewards: null, details: null });
    expect(commandReward('{"reward": "high"}', 0)).toEqual({ problem: expect.stringMatching(/not a finite number/) });
    expect(commandReward('{"reward": 1, "trace_rewards": [1, "x"]}', 0)).toEqual({ problem: expect.stringMatching(/trace_rewards/) });
  });
});

describe('--accept', () => {
  it('reward comparisons and status, joined by &&', () => {
    const accept = parseAccept('reward>=1');
    expect(accept({ reward: 1, status: 'completed' })).toBe(true);
    expect(accept({ reward: 0.5, status: 'completed' })).toBe(false);
    expect(accept({ reward: null, status: 'error' })).toBe(false);
    const both = parseAccept('reward > 0.5 && status == completed');
    expect(both({ reward: 1, status: 'timeout' })).toBe(false);
    expect(both({ reward: 1, status: 'completed' })).toBe(true);
    expect(() => parseAccept('score>1')).toThrow(/cannot read "score>1"/);
  });
});

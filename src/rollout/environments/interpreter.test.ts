import { describe, expect, it } from 'vitest';
import { commandNames, namedByTask, notFoundInterpreters } from './interpreter.js';

describe('the programs an evaluator command names itself', () => {
  it('takes the first word of each simple command, past assignments and wrappers', () => {
    expect(commandNames('python3 -m unittest -q test_stats')).toEqual(['python3']);
    expect(commandNames('cd sub && pytest -q | tee log; node "$POLAR_TASKS_DIR/check.cjs"')).toEqual(['pytest', 'tee', 'node']);
    expect(commandNames('FOO=1 timeout 60 env -i BAR=2 python3.12 x.py')).toEqual(['python3.12']);
    expect(commandNames('test "$(cat greeting.txt 2>/dev/null)" = \'hello, polar\'')).toEqual([]);
  });

  it('never a path (the agent may have deleted it), a word the shell expands, or any name where the command sets PATH', () => {
    expect(commandNames('./run.sh && bin/check')).toEqual([]);
    expect(commandNames('"$TOOL" x; $(which python3) y')).toEqual([]);
    expect(commandNames('PATH="$PWD:$PATH" mytool')).toEqual([]);
    expect(commandNames('export PATH=./bin:$PATH; python3 x.py')).toEqual([]);
  });
});

describe('the interpreters an output says were not found', () => {
  it("reads bash's, dash's, env's, pyenv's and a broken shim's way of saying it", () => {
    const output = [
      'bash: line 1: python3: command not found',
      '/tests/test.sh: line 6: node: command not found',
      'pyenv: python3.14: command not found',
      'sh: 1: pytest: not found',
      "/usr/bin/env: 'ruby': No such file or directory",
      '/opt/pyenv/shims/python3.11: line 12: /opt/pyenv/libexec/pyenv: No such file or directory',
    ].join('\n');
    expect(notFoundInterpreters(output)).toEqual(['python3', 'node', 'python3.14', 'pytest', 'ruby', 'python3.11']);
  });

  it("leaves the workspace's own programs to the verdict: they are the agent's", () => {
    expect(notFoundInterpreters('bash: line 1: mytool: command not found\n/tests/test.sh: line 3: /app/solution: No such file or directory')).toEqual([]);
  });
});

describe('namedByTask', () => {
  it('keeps only the names the command or the task folders mention', async () => {
    const fsm = await import('node:fs');
    const os = await import('node:os');
    const pathm = await import('node:path');
    const dir = fsm.mkdtempSync(pathm.join(os.tmpdir(), 'polar-named-by-task-'));
    try {
      fsm.mkdirSync(pathm.join(dir, 'sub'));
      fsm.writeFileSync(pathm.join(dir, 'sub', 'test.sh'), '#!/bin/bash\npython3.14 /tests/check.py\n');
      const cmd = { command: 'bash /tests/test.sh', readOnly: [{ source: dir, dest: '/tests' }] };
      // The agent's code printed "julia: command not found" and "python3.1: …": no file of the task names them.
      expect(await namedByTask(['python3.14', 'julia', 'python3.1', 'bash'], cmd)).toEqual(['bash', 'python3.14']);
    } finally {
      fsm.rmSync(dir, { recursive: true, force: true });
    }
  });
});

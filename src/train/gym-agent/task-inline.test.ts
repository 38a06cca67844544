import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { taskForRow, type TaskCatalog } from './task.js';

const catalog: TaskCatalog = { file: null, tasks: new Map(), allowInline: true };
const row = (task: Record<string, unknown>) => ({ task: { id: 't', prompt: 'p', evaluator: { type: 'session-completed' }, ...task } });

describe('inline tasks (rows from the network)', () => {
  it("may not name this machine's folders or repositories as their workspace: polar copies them outside the sandbox", () => {
    expect(() => taskForRow(row({ workspace: { dir: os.homedir() } }), catalog)).toThrow(/inline task's workspace must be/);
    expect(() => taskForRow(row({ workspace: { git: '/', commit: 'abcdef0' } }), catalog)).toThrow(/inline task's workspace must be/);
    expect(() => taskForRow(row({ workspace: { git: 'file:///root/repo', commit: 'abcdef0' } }), catalog)).toThrow(/inline task's workspace must be/);
    expect(taskForRow(row({ workspace: { git: 'https://example.com/r.git', commit: 'abcdef0' } }), catalog).workspace).toEqual({
      git: 'https://example.com/r.git',
      commit: 'abcdef0',
    });
    expect(taskForRow(row({ workspace: { empty: true } }), catalog).workspace).toEqual({ empty: true });
  });

  it('may not ask for the host network', () => {
    expect(() => taskForRow(row({ workspace: { empty: true }, network: 'host' }), catalog)).toThrow(/cannot ask for the host network/);
  });
});

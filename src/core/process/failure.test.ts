import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCommand } from './command.js';
import { commandFailure, toolReason } from './failure.js';

// Issue 40, item 3: a failed command's error leads with the tool's own reason, whole.

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-failure-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

describe('commandFailure', () => {
  it("a git clone of a plain folder leads with git's stderr, whole, and never with the command line", async () => {
    const plain = path.join(scratch, 'plain-folder-with-a-long-name-so-the-reason-is-longer-than-any-terminal-cut-of-eighty');
    fs.mkdirSync(plain);
    const flags = ['-c', 'user.name=polar', '-c', 'user.email=polar@localhost', '-c', 'core.hooksPath=/dev/null'];
    const r = await runCommand('git', [...flags, 'clone', '--quiet', '--no-checkout', plain, path.join(scratch, 'dest')], { timeoutMs: 30_000 });
    const text = commandFailure('git clone', r);
    const said = r.stderr.trim();
    expect(said).toMatch(/^fatal: /);
    expect(text).toBe(`git clone failed (exit 128): ${said}`);
    expect(text).not.toContain('user.email');
    expect(text).not.toContain('Command failed');
  });

  it('says what polar ran after the reason, when asked', () => {
    const text = commandFailure(
      'git checkout',
      { exitCode: 128, stderr: 'fatal: reference is not a tree: abc1234\n' },
      'git checkout --quiet --detach abc1234',
    );
    expect(text).toBe('git checkout failed (exit 128): fatal: reference is not a tree: abc1234 (polar ran: git checkout --quiet --detach abc1234)');
  });

  it('says how a command ended without an exit status', () => {
    expect(commandFailure('git clone', { exitCode: null, timedOut: true, stderr: '' })).toBe('git clone failed (timed out)');
    expect(commandFailure('git clone', { exitCode: null, startError: 'spawn git ENOENT', stderr: '' })).toBe(
      'git clone failed (could not start: spawn git ENOENT)',
    );
    expect(commandFailure('podman cp', { exitCode: null, signal: 'SIGKILL', stderr: '' })).toBe('podman cp failed (killed by SIGKILL)');
  });
});

describe('toolReason', () => {
  it("keeps the lines that say the error (git's fatal:, podman's Error:) over warnings and hints", () => {
    expect(toolReason('WARN[0000] some warning\nError: no such container polar-x\n')).toBe('Error: no such container polar-x');
    expect(toolReason("hint: do this\nfatal: repository '/x' does not exist\n")).toBe("fatal: repository '/x' does not exist");
  });

  it('else the last lines, one line each, stdout only when stderr is empty', () => {
    expect(toolReason('', 'a\nb\n\nc\n')).toBe('a | b | c');
    expect(toolReason('said\n', 'ignored')).toBe('said');
    expect(toolReason(Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n'))).toBe(Array.from({ length: 8 }, (_, i) => `line ${i + 12}`).join(' | '));
  });
});

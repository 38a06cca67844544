import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { PolarError } from '../core/errors.js';
import type { CallSummary } from '../proxy/call-record.js';
import { nextCommands } from './commands/demo.js';
import { exitCodeFor, invokedAs } from './output.js';
import { RunStatusLine } from './status-line.js';
import { removeTree } from '../../test/support/remove-tree.js';

describe('CLI output', () => {
  it('commands printed for pasting say `npx polar` when polar ran under npx', () => {
    expect(invokedAs({ npm_command: 'exec' })).toBe('npx polar');
    expect(invokedAs({})).toBe('polar');
    const prev = process.env.npm_command;
    process.env.npm_command = 'exec';
    try {
      expect(nextCommands('ses_1', 'polar.db')[1]).toBe('npx polar show ses_1 --tokenizer bundled:qwen3');
      expect(nextCommands('ses_1', 'polar.db')[6]).toBe('npx polar report ses_1 --tokenizer bundled:qwen3 --out report.html');
      expect(nextCommands('ses_1', '/tmp/x.db')[0]).toBe('npx polar sessions --db /tmp/x.db');
      // The replay command names the harness the demo ran (it was always claude-code).
      expect(nextCommands('ses_1', 'polar.db', 'codex')[4]).toBe('npx polar replay ses_1 --harness codex');
    } finally {
      if (prev === undefined) delete process.env.npm_command;
      else process.env.npm_command = prev;
    }
  });

  it('under npx, printed commands name a polar that npx resolves from where the user stands (npx polar is another npm package)', () => {
    const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'polar-invoked-')));
    try {
      const pkg = (root: string) => {
        fs.mkdirSync(path.join(root, 'bin'), { recursive: true });
        fs.writeFileSync(path.join(root, 'bin', 'polar.js'), '');
        fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'polar-rollout', bin: { polar: 'bin/polar.js' } }));
        return root;
      };
      const npx = { npm_command: 'exec' };
      // `npx polar-rollout` ran it from npx's cache: the same again (its one bin), never `npx polar`.
      const cached = pkg(path.join(tmp, '.npm', '_npx', 'abc123', 'node_modules', 'polar-rollout'));
      expect(invokedAs(npx, { packageRoot: cached, cwd: tmp })).toBe('npx polar-rollout');
      // A checkout: `npx polar` inside it (npm exec runs the project's own bin), its bin path outside it.
      const checkout = pkg(path.join(tmp, 'polar'));
      fs.mkdirSync(path.join(checkout, 'fixtures'));
      expect(invokedAs(npx, { packageRoot: checkout, cwd: checkout })).toBe('npx polar');
      expect(invokedAs(npx, { packageRoot: checkout, cwd: path.join(checkout, 'fixtures') })).toBe('npx polar');
      const elsewhere = path.join(tmp, 'work');
      fs.mkdirSync(elsewhere);
      expect(invokedAs(npx, { packageRoot: checkout, cwd: elsewhere })).toBe(`node ${path.join(checkout, 'bin', 'polar.js')}`);
      // A project that installed polar-rollout: its node_modules/.bin/polar is this polar.
      const project = path.join(tmp, 'project');
      const installed = pkg(path.join(project, 'node_modules', 'polar-rollout'));
      fs.mkdirSync(path.join(project, 'node_modules', '.bin'));
      fs.symlinkSync(path.join(installed, 'bin', 'polar.js'), path.join(project, 'node_modules', '.bin', 'polar'));
      expect(invokedAs(npx, { packageRoot: installed, cwd: project })).toBe('npx polar');
      // ... but a project whose `polar` bin is someone else's does not run this one.
      expect(invokedAs(npx, { packageRoot: checkout, cwd: project })).toBe(`node ${path.join(checkout, 'bin', 'polar.js')}`);
      expect(invokedAs({}, { packageRoot: checkout, cwd: elsewhere })).toBe('polar');
    } finally {
      removeTree(tmp);
    }
  });

  it('exit codes live in the CLI: 2 for usage errors, 1 otherwise', () => {
    expect(exitCodeFor(new PolarError('POLAR_USAGE', 'x'))).toBe(2);
    expect(exitCodeFor(new PolarError('POLAR_UPSTREAM_CONNECT', 'x', 502))).toBe(1);
    expect(exitCodeFor(new Error('x'))).toBe(1);
  });

  it("the run status line counts calls, tokens and errors from the proxy's call events", () => {
    const out = Object.assign(new PassThrough(), {
      isTTY: true,
      columns: 200,
      cursorTo: () => true,
      clearLine: () => true,
      moveCursor: () => true,
    }) as unknown as NodeJS.WriteStream;
    let text = '';
    (out as unknown as PassThrough).on('data', (d: Buffer) => (text += d.toString()));
    const line = new RunStatusLine(out);
    const call = (status: CallSummary['status'], p: number, s: number) => ({ status, promptTokens: p, sampledTokens: s }) as CallSummary;
    line.call(call('ok', 1200, 30));
    line.call(call('error', 0, 0));
    line.stop();
    expect(text).toMatch(/polar: 2 calls · 1,200 prompt \/ 30 sampled tokens · 1 error ·/);
  });
});

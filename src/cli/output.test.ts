import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { PolarError } from '../core/errors.js';
import type { CallSummary } from '../proxy/call-record.js';
import { nextCommands } from './commands/demo.js';
import { exitCodeFor, invokedAs } from './output.js';
import { RunStatusLine } from './status-line.js';

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

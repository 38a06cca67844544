import { PassThrough } from 'node:stream';
import { expect, it } from 'vitest';
import { RunStatusLine } from './status-line.js';

function tty(log: string[], name: string, isTTY = true): NodeJS.WriteStream {
  const stream = Object.assign(new PassThrough(), { isTTY, columns: 200, cursorTo: () => true, clearLine: () => true, moveCursor: () => true });
  stream.on('data', (d: Buffer) => log.push(`${name}:${d.toString()}`));
  return stream as unknown as NodeJS.WriteStream;
}

it('prints a line above the status line on a shared terminal: cleared first, drawn again below, stopping where it is', () => {
  const log: string[] = [];
  const err = tty(log, 'err');
  const out = tty(log, 'out');
  const status = new RunStatusLine(err);
  log.length = 0;
  status.printAbove('call 1  openai-chat', out);
  const at = log.indexOf('out:call 1  openai-chat\n');
  // The status line's row is cleared before the line is written there…
  expect(log.slice(0, at)).toContain('err:\r\x1b[2K');
  // …and its position saved again after it, so stopping (which restores the saved position) clears the status line, not the printed one.
  expect(log.slice(at + 1, at + 2)).toEqual(['err:\x1b7']);
  expect(log.slice(at + 2).join('')).toMatch(/polar: 0 calls/);
  status.stop();
});

it('writes the line as it is when stdout is not a terminal, or once the status line has stopped', () => {
  const log: string[] = [];
  const status = new RunStatusLine(tty(log, 'err'));
  log.length = 0;
  status.printAbove('call 1', tty(log, 'out', false));
  expect(log).toEqual(['out:call 1\n']);
  status.stop();
  log.length = 0;
  status.printAbove('call 2', tty(log, 'out'));
  expect(log).toEqual(['out:call 2\n']);
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { meaningfulTail, readLogTail } from './log-tail.js';
import { removeTree } from '../../test/support/remove-tree.js';

describe('meaningfulTail', () => {
  it("finds the cause in a Node crash, past its stack, its error object and Node's footer", () => {
    const log = [
      '# 2026-11-25T22:00:00.000Z "node" "agent.mjs"',
      'node:internal/modules/cjs/loader:1210',
      '  throw err;',
      '  ^',
      '',
      "Error: Cannot find module '/tmp/agent.mjs'",
      '    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)',
      '    at Module._load (node:internal/modules/cjs/loader:1038:27) {',
      "  code: 'MODULE_NOT_FOUND',",
      '  requireStack: []',
      '}',
      '',
      'Node.js v20.20.2',
      '',
    ].join('\n');
    expect(meaningfulTail(log)).toEqual(["Error: Cannot find module '/tmp/agent.mjs'"]);
  });

  it('takes the last lines that say something when none reads like a cause, without colour codes', () => {
    expect(meaningfulTail('# 2026-11-25T22:00:00.000Z "x"\nstarting\n\u001b[33mwaiting for the model\u001b[0m\n----\n\n')).toEqual([
      'starting',
      'waiting for the model',
    ]);
  });

  it('says nothing for a log with only polar’s header', () => {
    expect(meaningfulTail('# 2026-11-25T22:00:00.000Z "x"\n')).toEqual([]);
  });
});

describe('readLogTail', () => {
  it('reads only the end of a long log, and null for a missing one', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-log-tail-'));
    try {
      const file = path.join(dir, 'harness.log');
      fs.writeFileSync(file, `${'x'.repeat(100_000)}\nbwrap: execvp claude: No such file or directory\n`);
      const tail = readLogTail(file, 1000)!;
      expect(tail.length).toBe(1000);
      expect(meaningfulTail(tail)).toEqual(['bwrap: execvp claude: No such file or directory']);
      expect(readLogTail(path.join(dir, 'missing.log'))).toBeNull();
    } finally {
      removeTree(dir);
    }
  });
});

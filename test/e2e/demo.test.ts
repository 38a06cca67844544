import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { BIN } from './support.js';

const run = promisify(execFile);

describe('polar demo', () => {
  it('runs Claude Code against the mock server and shows a completed, captured session', { timeout: 300_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-test-'));
    try {
      const db = path.join(dir, 'demo.db');
      const { stdout } = await run(process.execPath, [BIN, 'demo', '--db', db, '--json'], { timeout: 280_000, env: { ...process.env, NO_COLOR: '1' } });
      const result = JSON.parse(stdout) as { ok: boolean; session: string; status: string; demoFile: string | null; harnessVersion: string };
      expect(result).toMatchObject({ ok: true, status: 'completed', demoFile: 'captured by polar' });
      const store = Store.open(db, { readonly: true });
      try {
        const calls = store.requests.list(result.session);
        expect(calls.length).toBeGreaterThanOrEqual(3);
        expect(calls.every((c) => c.status === 'ok' && c.tokenSource === 'upstream' && c.provider === 'anthropic-messages')).toBe(true);
      } finally {
        store.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--upstream-kind vllm-tito: polar renders and bridges; the text shows how each prompt was built', { timeout: 300_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-demo-test-'));
    try {
      const db = path.join(dir, 'demo.db');
      const { stdout } = await run(process.execPath, [BIN, 'demo', '--db', db, '--upstream-kind', 'vllm-tito'], { timeout: 280_000, env: { ...process.env, NO_COLOR: '1' } });
      expect(stdout).toMatch(/prompts built by polar: \d+ bridged, 1 full render \(first-call 1\)/);
      expect(stdout).toMatch(/bridged #1/);
      expect(stdout).toContain('the harness wrote polar-demo.txt');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

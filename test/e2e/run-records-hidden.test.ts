import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { polarRun, workspace, type Workspace } from './support.js';
import { patient } from '../support/patience.js';

/**
 * Issue 24: `polar run` in a project folder records into `./polar.db` and keeps `.polar/` (other
 * runs' homes and logs, the session-key master) beside it, and the sandbox makes that folder
 * writable. An agent there tried to read the database and overwrite it; both must fail, while the
 * rest of the folder stays the agent's to edit and the run's own home stays writable.
 */
const PROBE = `
const fs = require('node:fs');
const out = {};
const tryIt = (name, fn) => { try { out[name] = fn(); } catch (e) { out[name] = 'refused: ' + e.code; } };
tryIt('readDb', () => fs.readFileSync('polar.db').subarray(0, 15).toString('latin1'));
tryIt('writeDb', () => { fs.writeFileSync('polar.db', 'x'); return 'written'; });
tryIt('writeWal', () => { fs.writeFileSync('polar.db-wal', 'x'); return 'written'; });
tryIt('otherRuns', () => fs.readdirSync('.polar/runs').length);
tryIt('otherLog', () => fs.readFileSync(process.env.OTHER_LOG, 'utf8').length);
tryIt('editProject', () => { fs.writeFileSync('notes.txt', 'edited'); return 'written'; });
tryIt('ownHome', () => { fs.writeFileSync(process.env.HOME + '/probe', 'x'); return 'written'; });
fs.writeFileSync('probe.json', JSON.stringify(out));
`;

const bwrap = findBwrap();
let upstream: ReferenceUpstream;
let w: Workspace;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  w = workspace();
});
afterAll(async () => {
  await upstream?.close();
  w?.cleanup();
});

describe.skipIf(!bwrap)('polar run hides its own records from the agent (skipped: bubblewrap is not installed)', () => {
  it(
    'the database and .polar/ in the working directory are neither readable nor writable inside; the project and the own home are',
    async () => {
      const db = path.join(w.ws, 'polar.db');
      const probe = path.join(w.dir, 'probe.cjs');
      fs.writeFileSync(probe, PROBE);
      fs.writeFileSync(path.join(w.ws, 'notes.txt'), 'original');
      const common = ['--harness', 'custom', '--upstream', upstream.url, '--db', db, '--cwd', w.ws, '--prompt', 'x', '--sandbox-ro', probe];
      // A first run leaves its log under .polar/runs: the second run's agent must not find it.
      const first = await polarRun([...common, '--command', 'true']);
      expect(first.code, first.stderr).toBe(0);
      const otherLog = fs.readdirSync(path.join(w.ws, '.polar', 'runs')).map((s) => path.join(w.ws, '.polar', 'runs', s, 'harness.log'))[0]!;
      expect(fs.existsSync(otherLog)).toBe(true);
      const second = await polarRun([...common, '--command', `node ${probe}`], { OTHER_LOG: otherLog });
      expect(second.code, second.stderr).toBe(0);
      const out = JSON.parse(fs.readFileSync(path.join(w.ws, 'probe.json'), 'utf8')) as Record<string, unknown>;
      expect(out.readDb).not.toContain('SQLite');
      expect(String(out.writeDb)).toMatch(/^refused/);
      expect(String(out.writeWal)).toMatch(/^refused/);
      expect(out.otherRuns).toBe(1); // its own run folder only
      expect(String(out.otherLog)).toMatch(/^refused/);
      expect(out.editProject).toBe('written');
      expect(out.ownHome).toBe('written');
      expect(fs.readFileSync(path.join(w.ws, 'notes.txt'), 'utf8')).toBe('edited');
      // The database is intact and holds both sessions.
      const store = Store.open(db, { readonly: true });
      try {
        expect(store.sessions.list().length).toBeGreaterThanOrEqual(2);
      } finally {
        store.close();
      }
    },
    patient(120_000),
  );
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isValidSessionName } from '../core/ids.js';
import { identifyCaller } from './identity.js';
import { forgedSessionKey, loadOrCreateMaster, masterKeyFile, parseSessionKey, readMaster, SessionKeys } from './session-keys.js';
import { removeTree } from '../../test/support/remove-tree.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) removeTree(d);
});

describe('session keys', () => {
  const keys = SessionKeys.random();

  it('a key is polar-<session>~<43 base64url chars>, and names its session to identifyCaller', () => {
    const key = keys.keyFor('ses_abc.1:x-y');
    expect(key).toMatch(/^polar-ses_abc\.1:x-y~[A-Za-z0-9_-]{43}$/);
    expect(parseSessionKey(key)).toEqual({ session: 'ses_abc.1:x-y', secret: key.split('~')[1] });
    expect(identifyCaller({ authorization: `Bearer ${key}` }, null, 'd')).toMatchObject({ sessionId: 'ses_abc.1:x-y', sessionSource: 'api-key' });
    // `~` can never be part of a session name, so the split is unambiguous.
    expect(isValidSessionName('a~b')).toBe(false);
  });

  it('check: the own key passes; everything else says why not', () => {
    expect(keys.check([keys.keyFor('s')], 's')).toBeNull();
    expect(keys.check([], 's')).toBe('no-key');
    expect(keys.check(['polar-s'], 's')).toBe('no-secret');
    expect(keys.check([forgedSessionKey('s')], 's')).toBe('bad-secret');
    expect(keys.check([`${keys.keyFor('s')}x`], 's')).toBe('bad-secret');
    expect(keys.check([keys.keyFor('t')], 's')).toBe('wrong-session');
    expect(keys.check(['sk-other'], 's')).toBe('unknown-key');
    // Any one proving credential is enough, whatever else comes with it.
    expect(keys.check(['sk-other', keys.keyFor('s')], 's')).toBeNull();
    // Another master's key for the same session is a guess.
    expect(keys.check([SessionKeys.random().keyFor('s')], 's')).toBe('bad-secret');
  });

  it('the master file is made once, 0600 in a 0700 folder, and read back to the same keys', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-keys-'));
    dirs.push(dir);
    const file = masterKeyFile(path.join(dir, 'polar.db'));
    expect(file).toBe(path.join(dir, '.polar', 'session-keys.master'));
    expect(readMaster(file)).toBeNull();
    const made = loadOrCreateMaster(file);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(loadOrCreateMaster(file).keyFor('s')).toBe(made.keyFor('s'));
    expect(readMaster(file)!.check([made.keyFor('s')], 's')).toBeNull();
    expect(fs.readdirSync(path.dirname(file))).toEqual(['session-keys.master']);
    fs.writeFileSync(file, 'short');
    expect(() => readMaster(file)).toThrow(/session-key master/);
  });
});

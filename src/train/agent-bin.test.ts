import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentBin } from './agent-bin.js';
import { removeTree } from '../../test/support/remove-tree.js';

let dir: string;
beforeAll(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'polar-agent-bin-')));
});
afterAll(() => removeTree(dir));

describe('agentBin', () => {
  it("names this package's launcher, which exists", () => {
    const { bin, warning } = agentBin();
    expect(bin).toBe(path.resolve(__dirname, '../../bin/polar.js'));
    expect(fs.existsSync(bin)).toBe(true);
    expect(warning).toBeNull();
  });

  it('follows a link to the real install (npm links packages and bins)', () => {
    const real = path.join(dir, 'lib', 'node_modules', 'polar-rollout');
    fs.mkdirSync(path.join(real, 'bin'), { recursive: true });
    fs.symlinkSync(real, path.join(dir, 'linked'));
    expect(agentBin(path.join(dir, 'linked'))).toEqual({ bin: path.join(real, 'bin', 'polar.js'), warning: null });
  });

  it("warns when the package is in npx's cache, and says how to install it instead", () => {
    const cached = path.join(dir, '.npm', '_npx', '3f2a9c', 'node_modules', 'polar-rollout');
    fs.mkdirSync(cached, { recursive: true });
    const { bin, warning } = agentBin(cached);
    expect(bin).toBe(path.join(cached, 'bin', 'polar.js'));
    expect(warning).toContain(`npx's temporary cache (${cached})`);
    expect(warning).toMatch(/npm i -g polar-rollout/);
  });
});

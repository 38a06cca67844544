import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { managerEnv, pathEntryDirs, toolchainDirs } from './view.js';

/**
 * Version managers laid out as they install themselves (issue 39: a pyenv outside the home bound
 * only its shims/ and bin/, so every shim exited 127 inside). Built in the checkout, not /tmp: the
 * sandbox has a private /tmp, so toolchainDirs never binds a folder under it.
 */
const base = path.resolve(import.meta.dirname, '..', '..', 'test');
const underTmp = ['/tmp/', '/var/tmp/'].some((t) => `${base}/`.startsWith(t));

describe.skipIf(underTmp)('toolchain layouts (skipped: the checkout is under /tmp, which the sandbox never binds)', () => {
  let root: string;
  let home: string;
  const at = (...parts: string[]) => path.join(root, ...parts);
  /** Folders, and files (a path with content), under the scratch root. */
  const make = (entries: Record<string, string | null>) => {
    for (const [p, content] of Object.entries(entries)) {
      if (content === null) fs.mkdirSync(at(p), { recursive: true });
      else {
        fs.mkdirSync(path.dirname(at(p)), { recursive: true });
        fs.writeFileSync(at(p), content, { mode: 0o755 });
      }
    }
  };

  beforeAll(() => {
    root = fs.mkdtempSync(path.join(base, '.toolchains-'));
    home = at('home', 'u');
    fs.mkdirSync(home, { recursive: true });
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  /** pyenv as `git clone` leaves it, plus one installed version and its shims. */
  function pyenv(prefix: string): string {
    make({
      [`${prefix}/.git`]: null,
      [`${prefix}/libexec/pyenv`]: '#!/usr/bin/env bash\n',
      [`${prefix}/shims/python3`]: '#!/usr/bin/env bash\n',
      [`${prefix}/plugins/pyenv-virtualenv/shims`]: null,
      [`${prefix}/versions/3.12.4/bin/python3.12`]: '',
      [`${prefix}/bin`]: null,
    });
    fs.symlinkSync('../libexec/pyenv', at(prefix, 'bin', 'pyenv'));
    return at(prefix);
  }

  it('pyenv outside the home (a git checkout): its whole root from shims/, bin/ or a plugin, so libexec/ and versions/ come along', () => {
    const r = pyenv('opt/pyenv');
    expect(toolchainDirs(path.join(r, 'shims'), home)).toEqual([r]);
    expect(toolchainDirs(path.join(r, 'bin'), home)).toEqual([r]);
    expect(toolchainDirs(path.join(r, 'plugins', 'pyenv-virtualenv', 'shims'), home)).toEqual([r]);
    expect(toolchainDirs(path.join(r, 'versions', '3.12.4', 'bin'), home)).toEqual([r]);
  });

  it('pyenv in a home folder that is not a dot-folder: its root, not the folder around it', () => {
    const r = pyenv(path.relative(root, path.join(home, 'tools', 'pyenv')));
    expect(toolchainDirs(path.join(r, 'shims'), home)).toEqual([r]);
  });

  it('a checkout that only looks like one (shims/ and no libexec/pyenv) still binds only the entry', () => {
    make({ 'srv/lookalike/.git': null, 'srv/lookalike/shims': null, 'srv/lookalike/bin': null });
    expect(toolchainDirs(at('srv/lookalike/shims'), home)).toEqual([at('srv/lookalike/shims')]);
    expect(toolchainDirs(at('srv/lookalike/bin'), home)).toEqual([at('srv/lookalike/bin')]);
  });

  it("conda: an env under envs/ binds its base (its files link into the base's pkgs/); an env of its own binds itself", () => {
    make({
      'opt/conda/conda-meta': null,
      'opt/conda/bin': null,
      'opt/conda/condabin': null,
      'opt/conda/envs/x/conda-meta': null,
      'opt/conda/envs/x/bin': null,
      'srv/project/.git': null,
      'srv/project/env/conda-meta': null,
      'srv/project/env/bin': null,
    });
    expect(toolchainDirs(at('opt/conda/envs/x/bin'), home)).toEqual([at('opt/conda')]);
    expect(toolchainDirs(at('opt/conda/condabin'), home)).toEqual([at('opt/conda')]);
    expect(toolchainDirs(at('srv/project/env/bin'), home)).toEqual([at('srv/project/env')]);
  });

  it('nvm (a git checkout) and volta: their root from a version or shim folder, with the variable that finds it', () => {
    make({
      'opt/nvm/.git': null,
      'opt/nvm/nvm.sh': '# nvm\n',
      'opt/nvm/versions/node/v22.3.0/bin/node': '',
      'opt/volta/bin/volta-shim': '',
      'opt/volta/tools/image/node/22.3.0/bin/node': '',
    });
    expect(toolchainDirs(at('opt/nvm/versions/node/v22.3.0/bin'), home)).toEqual([at('opt/nvm')]);
    expect(toolchainDirs(at('opt/volta/bin'), home)).toEqual([at('opt/volta')]);
    // volta's shims look for $VOLTA_HOME, else ~/.volta, which the sandbox's private home has not.
    expect(managerEnv([at('opt/nvm'), at('opt/volta')], {})).toEqual({ NVM_DIR: at('opt/nvm'), VOLTA_HOME: at('opt/volta') });
  });

  it("PYENV_ROOT: the host's where it names a root on PATH, else the first on PATH", () => {
    const first = at('opt/pyenv');
    const second = path.join(home, 'tools', 'pyenv');
    expect(managerEnv([first, second], {})).toEqual({ PYENV_ROOT: first });
    expect(managerEnv([first, second], { PYENV_ROOT: second })).toEqual({ PYENV_ROOT: second });
    expect(managerEnv([first], { PYENV_ROOT: '/elsewhere' })).toEqual({ PYENV_ROOT: first });
  });

  it('follows links out of a PATH folder: a venv whose python is a pyenv version, a tool linked from /opt, never into ~/.ssh', () => {
    make({ 'srv/venv/bin': null, 'opt/node-v22/bin/node': '', 'srv/links': null, [`${path.relative(root, home)}/.ssh/tool`]: '' });
    fs.symlinkSync(at('opt/pyenv/versions/3.12.4/bin/python3.12'), at('srv/venv/bin/python3'));
    fs.symlinkSync(at('opt/node-v22/bin/node'), at('srv/links/node'));
    fs.symlinkSync(path.join(home, '.ssh', 'tool'), at('srv/links/tool'));
    expect(pathEntryDirs(at('srv/venv/bin'), home)).toEqual([at('srv/venv'), at('opt/pyenv')]);
    expect(pathEntryDirs(at('srv/links'), home)).toEqual([at('srv/links'), at('opt/node-v22')]);
  });

  it('a PATH entry that is a link binds where it leads, and a pyenv version linked from elsewhere comes along', () => {
    make({ 'srv/python-3.11/bin/python3': '' });
    fs.symlinkSync(at('srv/python-3.11'), at('opt/pyenv/versions/3.11'));
    fs.symlinkSync(at('opt/pyenv/shims'), at('srv/shims-link'));
    expect(pathEntryDirs(at('srv/shims-link'), home)).toEqual([at('srv/shims-link'), at('opt/pyenv'), at('srv/python-3.11')]);
  });
});

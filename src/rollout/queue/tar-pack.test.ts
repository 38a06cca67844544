import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packTar, TooBigError } from './tar-pack.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-tar-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The same files, written in another order at another time: what a second machine's copy looks like. */
function make(name: string, order: string[], mtime: Date): string {
  const root = path.join(dir, name);
  for (const f of order) {
    fs.mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
    fs.writeFileSync(path.join(root, f), `content of ${f}\n`);
    fs.utimesSync(path.join(root, f), mtime, mtime);
  }
  return root;
}

describe('packTar', () => {
  it('gives the same bytes for the same files whatever their order of creation and times, and GNU tar reads them back', async () => {
    const files = ['b.txt', 'a/z.txt', 'a/b.txt', 'A.txt'];
    const one = await packTar(make('one', files, new Date(1e12)), path.join(dir, 'one.tar'), 1e9);
    const two = await packTar(make('two', [...files].reverse(), new Date(2e12)), path.join(dir, 'two.tar'), 1e9);
    expect(two.digest).toBe(one.digest);
    expect(fs.readFileSync(path.join(dir, 'two.tar')).equals(fs.readFileSync(path.join(dir, 'one.tar')))).toBe(true);
    const listed = execFileSync('tar', ['-tf', path.join(dir, 'one.tar')], { encoding: 'utf8' })
      .trim()
      .split('\n');
    expect(listed).toEqual(['A.txt', 'a/', 'a/b.txt', 'a/z.txt', 'b.txt']);
    // A changed byte is another digest.
    fs.writeFileSync(path.join(dir, 'two', 'a', 'b.txt'), 'content of a/b.tx!\n');
    expect((await packTar(path.join(dir, 'two'), path.join(dir, 'three.tar'), 1e9)).digest).not.toBe(one.digest);
  });

  it('stops past the cap', async () => {
    const root = make('cap', ['x.txt'], new Date());
    await expect(packTar(root, path.join(dir, 'cap.tar'), 1024)).rejects.toBeInstanceOf(TooBigError);
  });
});

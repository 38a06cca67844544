import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Reads a Harbor verifier's reward file as Harbor does: reward.json preferred (verifier.py:263-266;
 * its numeric fields, :102-108, with reward.txt as the `reward` when it lacks one, :121-129), else
 * reward.txt (one number, :67-80). Throws a plain Error saying what is wrong.
 */
export async function readRewards(verifierDir: string): Promise<{ reward: number; all: Record<string, number>; file: string }> {
  const json = await readIf(path.join(verifierDir, 'reward.json'));
  const text = await readIf(path.join(verifierDir, 'reward.txt'));
  if (json === null && text === null) throw new Error('the verifier wrote no reward: neither /logs/verifier/reward.txt nor /logs/verifier/reward.json');
  const fromText = (): number => {
    const n = text!.trim() === '' ? NaN : Number(text!.trim());
    if (!Number.isFinite(n)) throw new Error(`/logs/verifier/reward.txt is not one number: ${JSON.stringify(text!.slice(0, 100))}`);
    return n;
  };
  if (json !== null) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      throw new Error(`/logs/verifier/reward.json is not JSON: ${JSON.stringify(json.slice(0, 100))}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('/logs/verifier/reward.json must be an object ({"reward": x, …})');
    const all: Record<string, number> = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'number' && Number.isFinite(v)) all[k] = v;
    if (all.reward === undefined && text !== null) all.reward = fromText();
    const keys = Object.keys(all);
    const reward = all.reward ?? (keys.length === 1 ? all[keys[0]!] : undefined);
    if (reward === undefined)
      throw new Error(
        `/logs/verifier/reward.json has ${keys.length === 0 ? 'no numeric field' : `no "reward" field among ${keys.join(', ')}`}: polar needs one number for the sample`,
      );
    return { reward, all, file: 'reward.json' };
  }
  const reward = fromText();
  return { reward, all: { reward }, file: 'reward.txt' };
}

/**
 * A reward file as the verifier left it. The agent's code may have run under test.sh, so a symlink
 * there could point at any host file polar can read (and polar would quote it in an error): only a
 * regular file is read, opened without following a link.
 */
async function readIf(file: string): Promise<string | null> {
  let st: Awaited<ReturnType<typeof fs.lstat>>;
  try {
    st = await fs.lstat(file);
  } catch {
    return null;
  }
  if (!st.isFile()) throw new Error(`/logs/verifier/${path.basename(file)} is not a regular file`);
  const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  try {
    return (await handle.read({ buffer: Buffer.alloc(Math.min(st.size, 1024 * 1024)), position: 0 })).buffer.toString('utf8');
  } finally {
    await handle.close();
  }
}

import { describe, expect, it } from 'vitest';
import { PolarError } from '../../core/errors.js';
import { whileUnreachable } from './client.js';

describe('whileUnreachable', () => {
  const unreachable = () => new PolarError('POLAR_STORE_UNREACHABLE', 'PostgreSQL at x is unreachable: timeout exceeded when trying to connect', 503);

  it('tries again while the server cannot be reached, and returns what the first success returns', async () => {
    let calls = 0;
    const got = await whileUnreachable(async () => {
      calls++;
      if (calls < 3) throw new Error('timeout exceeded when trying to connect');
      return 'row';
    });
    expect([got, calls]).toEqual(['row', 3]);
  });

  it('throws any other error at once, and the last unreachable one when its time is up', async () => {
    let calls = 0;
    const refused = new Error('duplicate key value violates unique constraint');
    await expect(
      whileUnreachable(async () => {
        calls++;
        throw refused;
      }),
    ).rejects.toBe(refused);
    expect(calls).toBe(1);
    const last = unreachable();
    await expect(
      whileUnreachable(async () => {
        throw last;
      }, 0),
    ).rejects.toBe(last);
  });
});

import { describe, expect, it } from 'vitest';
import { PolarError } from '../../core/errors.js';
import { isUnreachable, whileUnreachable } from './client.js';

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
    const given = await whileUnreachable(async () => {
      throw last;
    }, 0).catch((e: unknown) => e as PolarError);
    expect(given).toBeInstanceOf(PolarError);
    expect(given.code).toBe('POLAR_STORE_UNREACHABLE');
    expect(given.cause).toBe(last);
    expect(given.message).toMatch(/^PostgreSQL at x is unreachable: .*POLAR_PG_RETRY_S=SECONDS/);
  });

  it('says once when it starts waiting and once when the server is back, however many wait at once', async () => {
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    let down = 2;
    const flaky = async () => {
      if (down-- > 0) throw Object.assign(new Error('the database system is shutting down'), { code: '57P03' });
      return 'row';
    };
    const got = await Promise.all([whileUnreachable(flaky, 60_000, log), whileUnreachable(flaky, 60_000, log)]);
    expect(got).toEqual(['row', 'row']);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^the database system is shutting down; waiting for it up to 60 s \(POLAR_PG_RETRY_S\)$/);
    expect(lines[1]).toMatch(/^PostgreSQL is reachable again after \d+ s$/);
  });
});

describe('isUnreachable', () => {
  it('knows every way a restart or failover shows itself, and nothing else', () => {
    const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
    for (const e of [
      pgError('57P01', 'terminating connection due to administrator command'),
      pgError('57P03', 'the database system is shutting down'),
      pgError('57P03', 'the database system is starting up'),
      pgError('57P03', 'the database system is in recovery mode'),
      new Error('Connection terminated unexpectedly'),
      pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
      Object.assign(new AggregateError([pgError('ECONNREFUSED', 'connect ECONNREFUSED ::1:5432'), pgError('ECONNREFUSED', 'x')]), { code: undefined }),
      new Error('Client has encountered a connection error and is not queryable'),
      // PgBouncer in front of a restarting server (issue 43's fleet check: both coordinators ended on it).
      pgError('08P01', 'server login has been failing, try again later (server_login_retry)'),
      pgError('08P01', 'pgbouncer cannot connect to server'),
    ])
      expect(isUnreachable(e), e.message).toBe(true);
    for (const e of [
      pgError('42703', 'column "x" does not exist'),
      pgError('23505', 'duplicate key value violates unique constraint'),
      pgError('08P01', 'no more connections allowed (max_client_conn)'),
      new PolarError('POLAR_USAGE', 'no such rollout'),
    ])
      expect(isUnreachable(e), e.message).toBe(false);
  });
});

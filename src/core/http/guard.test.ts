import { describe, expect, it } from 'vitest';
import { isJsonContentType, isLoopbackHost, presentedTokens, requireTokenBeyondLoopback, tokenPresented } from './guard.js';

describe('http-guard', () => {
  it('takes JSON media types only: a CORS simple request (text/plain, form, multipart) is refused', () => {
    for (const ok of ['application/json', 'Application/JSON; charset=utf-8', 'application/vnd.api+json']) expect(isJsonContentType(ok), ok).toBe(true);
    for (const bad of [
      undefined,
      '',
      'text/plain',
      'text/plain;charset=UTF-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'text/json',
      'application/jsonp',
    ])
      expect(isJsonContentType(bad), String(bad)).toBe(false);
  });

  it('reads the token from x-polar-auth-token or a bearer Authorization, and compares it whole', () => {
    expect(presentedTokens({ 'x-polar-auth-token': ' t1 ', authorization: 'Bearer t2' })).toEqual(['t1', 't2']);
    expect(presentedTokens({ authorization: 'Basic dXNlcjpwdw==' })).toEqual([]);
    expect(tokenPresented({ authorization: 'bearer secret-token' }, 'secret-token')).toBe(true);
    expect(tokenPresented({ authorization: 'Bearer secret-toke' }, 'secret-token')).toBe(false);
    expect(tokenPresented({ authorization: 'Bearer secret-token-and-more' }, 'secret-token')).toBe(false);
    expect(tokenPresented({ 'x-api-key': 'secret-token' }, 'secret-token')).toBe(false);
  });

  it('a server beyond loopback needs a token', () => {
    for (const h of ['127.0.0.1', '127.0.0.2', 'localhost', '::1', '[::1]']) expect(isLoopbackHost(h), h).toBe(true);
    expect(() => requireTokenBeyondLoopback('0.0.0.0', null, 'x')).toThrow(/binding 0\.0\.0\.0 exposes it beyond this machine/);
    expect(() => requireTokenBeyondLoopback('192.0.2.1', '', 'x')).toThrow();
    expect(() => requireTokenBeyondLoopback('0.0.0.0', 'token', 'x')).not.toThrow();
    expect(() => requireTokenBeyondLoopback('127.0.0.1', null, 'x')).not.toThrow();
  });
});

import { describe, expect, it } from 'vitest';
import { pathOf, Router } from './router.js';

describe('Router', () => {
  const router = new Router<string>()
    .on('GET', '/', 'ready')
    .on('POST', '/run', 'run')
    .on(['GET', 'HEAD'], '/v1/models', 'models')
    .on('POST', '/s/:session/v1/chat/completions', 'session-chat')
    .on('POST', '/s/:session/*', 'session-other')
    .on('GET', '/files/:a/:b', 'file');

  it('finds an exact path by method, with no params', () => {
    expect(router.match('GET', '/')).toEqual({ found: true, handler: 'ready', params: {} });
    expect(router.match('POST', '/run')).toEqual({ found: true, handler: 'run', params: {} });
    expect(router.match('HEAD', '/v1/models')).toMatchObject({ found: true, handler: 'models' });
  });

  it('reads :params, percent-decoded, and the rest of the path after *', () => {
    expect(router.match('POST', '/s/my%20session/v1/chat/completions')).toEqual({ found: true, handler: 'session-chat', params: { session: 'my session' } });
    expect(router.match('POST', '/s/abc/v1/messages')).toEqual({ found: true, handler: 'session-other', params: { session: 'abc', '*': '/v1/messages' } });
    expect(router.match('GET', '/files/x/y')).toEqual({ found: true, handler: 'file', params: { a: 'x', b: 'y' } });
    // Malformed escapes stay as sent rather than throwing.
    expect(router.match('POST', '/s/%E0%A4/v1/chat/completions')).toMatchObject({ params: { session: '%E0%A4' } });
  });

  it('says 404 (no methods) for a path no route has', () => {
    expect(router.match('GET', '/nowhere')).toEqual({ found: false, allowed: [] });
    expect(router.match('GET', '/files/x')).toEqual({ found: false, allowed: [] });
    expect(router.match('GET', '/files/x/y/z')).toEqual({ found: false, allowed: [] });
    // An empty :param segment is not a match; `*` needs something after its prefix.
    expect(router.match('GET', '/files//y')).toEqual({ found: false, allowed: [] });
    expect(router.match('POST', '/s/abc')).toEqual({ found: false, allowed: [] });
  });

  it('says 405 with the methods the path has for a wrong method', () => {
    expect(router.match('GET', '/run')).toEqual({ found: false, allowed: ['POST'] });
    expect(router.match('DELETE', '/v1/models')).toEqual({ found: false, allowed: ['GET', 'HEAD'] });
    expect(router.match('GET', '/s/abc/v1/chat/completions')).toEqual({ found: false, allowed: ['POST'] });
  });

  it('matches exactly: no case folding, trailing slash or query stripping of its own', () => {
    expect(router.match('POST', '/run/').found).toBe(false);
    expect(router.match('POST', '/RUN').found).toBe(false);
    expect(router.match('POST', '/run?x=1').found).toBe(false);
    expect(router.match('POST', pathOf('/run?x=1')).found).toBe(true);
  });

  it('refuses a pattern without a leading slash, and lets a later route replace an earlier one', () => {
    expect(() => new Router<string>().on('GET', 'run', 'x')).toThrow(/starts with \//);
    const r = new Router<string>().on('GET', '/a/:id', 'first').on('GET', '/a/:id', 'second');
    expect(r.match('GET', '/a/1')).toMatchObject({ handler: 'second' });
  });
});

describe('pathOf', () => {
  it('drops the query only', () => {
    expect(pathOf('/v1/models?limit=2')).toBe('/v1/models');
    expect(pathOf(undefined)).toBe('/');
    expect(pathOf('/a')).toBe('/a');
  });
});

describe('Router precedence', () => {
  it('prefers an exact segment to a :param, and a :param to *, whatever the order they were added', () => {
    const r = new Router<string>().on('GET', '/s/*', 'rest').on('GET', '/s/:id/x', 'param').on('GET', '/s/models/x', 'exact');
    expect(r.match('GET', '/s/models/x')).toMatchObject({ handler: 'exact' });
    expect(r.match('GET', '/s/abc/x')).toEqual({ found: true, handler: 'param', params: { id: 'abc' } });
    expect(r.match('GET', '/s/abc/y')).toEqual({ found: true, handler: 'rest', params: { '*': '/abc/y' } });
    // Falls back from an exact segment whose subtree has no route for the rest.
    const t = new Router<string>().on('GET', '/a/b/c', 'abc').on('GET', '/a/:x/d', 'xd');
    expect(t.match('GET', '/a/b/d')).toEqual({ found: true, handler: 'xd', params: { x: 'b' } });
  });

  it('lists the methods of every route a path matches for a 405', () => {
    const r = new Router<string>().on('GET', '/v1/models', 'exact').on('POST', '/v1/:thing', 'param').on('PUT', '/v1/*', 'rest');
    expect(r.match('DELETE', '/v1/models')).toEqual({ found: false, allowed: ['GET', 'POST', 'PUT'] });
  });
});

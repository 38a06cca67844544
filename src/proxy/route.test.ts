import { describe, expect, it } from 'vitest';
import { agentFromHeaders, identifyCaller } from './identity.js';
import { detectProvider, matchRoute } from './route.js';

describe('matchRoute', () => {
  it('finds the provider path with or without a session prefix and query', () => {
    expect(matchRoute('POST', '/v1/chat/completions')).toEqual({
      kind: 'model-call',
      provider: 'openai-chat',
      apiPath: '/v1/chat/completions',
      pathSession: null,
    });
    expect(matchRoute('POST', '/s/abc/v1/chat/completions?x=1')).toMatchObject({ kind: 'model-call', pathSession: 'abc' });
    expect(matchRoute('POST', '/s/a%3Ab/v1//chat/completions/')).toMatchObject({ kind: 'model-call', pathSession: 'a:b' });
    expect(matchRoute('GET', '/s/abc/v1/models')).toMatchObject({ kind: 'models', pathSession: 'abc' });
  });

  it('tells a wrong method from an unknown path; other OpenAI endpoints are never guessed at', () => {
    expect(matchRoute('GET', '/v1/chat/completions')).toMatchObject({ kind: 'not-found', methodNotAllowed: true });
    expect(matchRoute('POST', '/v1/embeddings')).toMatchObject({ kind: 'not-found', methodNotAllowed: false });
    expect(matchRoute('GET', '/v1/whatever')).toMatchObject({ kind: 'not-found', methodNotAllowed: false });
    expect(matchRoute('POST', '/v1/whatever')).toMatchObject({ kind: 'detect' });
  });

  it('routes every provider path, also under an extra prefix', () => {
    expect(matchRoute('POST', '/v1/messages?beta=true')).toMatchObject({ kind: 'model-call', provider: 'anthropic-messages' });
    expect(matchRoute('POST', '/v1/messages/count_tokens?beta=true')).toMatchObject({ kind: 'count-tokens', provider: 'anthropic-messages' });
    expect(matchRoute('POST', '/v1/responses')).toMatchObject({ kind: 'model-call', provider: 'openai-responses' });
    expect(matchRoute('POST', '/openai/v1/chat/completions')).toMatchObject({ kind: 'model-call', provider: 'openai-chat' });
    expect(matchRoute('POST', '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse')).toMatchObject({
      kind: 'model-call',
      provider: 'google-generate-content',
      stream: true,
    });
    expect(matchRoute('POST', '/s/x/v1/models/gemini-2.5-pro:generateContent')).toMatchObject({ kind: 'model-call', stream: false, pathSession: 'x' });
    expect(matchRoute('POST', '/v1beta/models/m:countTokens')).toMatchObject({ kind: 'count-tokens', provider: 'google-generate-content' });
    expect(matchRoute('GET', '/v1beta/models')).toMatchObject({ kind: 'models', flavor: 'google' });
    expect(matchRoute('HEAD', '/api/hello')).toMatchObject({ kind: 'probe' });
  });
});

describe('detectProvider', () => {
  it('goes by the anthropic-version header, then the body shape', () => {
    expect(detectProvider({ 'anthropic-version': '2023-06-01' }, { messages: [] })).toBe('anthropic-messages');
    expect(detectProvider({}, { contents: [] })).toBe('google-generate-content');
    expect(detectProvider({}, { input: [{ role: 'user', content: 'x' }] })).toBe('openai-responses');
    expect(detectProvider({}, { input: 'x', instructions: 'y' })).toBe('openai-responses');
    expect(detectProvider({}, { messages: [] })).toBe('openai-chat');
    expect(detectProvider({}, { input: 'embed me' })).toBeNull();
    expect(detectProvider({}, 'nope')).toBeNull();
  });
});

describe('identifyCaller', () => {
  it('path, then header, then polar- key, then the default', () => {
    const all = { 'x-polar-session': 'h', authorization: 'Bearer polar-k' };
    expect(identifyCaller(all, 'p', 'd')).toMatchObject({ sessionId: 'p', sessionSource: 'path' });
    expect(identifyCaller(all, null, 'd')).toMatchObject({ sessionId: 'h', sessionSource: 'header' });
    expect(identifyCaller({ authorization: 'Bearer polar-k' }, null, 'd')).toMatchObject({ sessionId: 'k', sessionSource: 'api-key' });
    expect(identifyCaller({ 'x-goog-api-key': 'polar-g' }, null, 'd')).toMatchObject({ sessionId: 'g' });
    expect(identifyCaller({ authorization: 'Bearer sk-other' }, null, 'd')).toMatchObject({ sessionId: 'd', sessionSource: 'default' });
    expect(identifyCaller({ authorization: 'Bearer polar-' }, null, 'd')).toMatchObject({ sessionId: 'd' });
  });

  it('takes the agent id from the first configured header present', () => {
    expect(agentFromHeaders({ 'x-b': 'two', 'x-a': 'one' }, ['x-a', 'x-b'])).toBe('one');
    expect(agentFromHeaders({}, ['x-a'])).toBe('main');
    expect(identifyCaller({ 'x-polar-agent': 'sub' }, null, 'd').agentId).toBe('sub');
  });
});

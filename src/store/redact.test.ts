import { describe, expect, it } from 'vitest';
import { redactHeaders, redactPath, scrubSecrets, secretValues } from './redact.js';

describe('redaction', () => {
  const headers = {
    Authorization: 'Bearer sk-live-abcdef123456',
    'x-api-key': 'ant-key-987654321',
    'x-goog-api-key': 'AIzaSyExample000',
    cookie: 'session=abc',
    'proxy-authorization': 'Basic dXNlcjpwYXNz',
    'content-type': 'application/json',
    'x-claude-code-session-id': 'abc',
    'x-auth-token': 'tok-1234567890',
    'openai-api-key': 'sk-proj-0987654321',
    'x-stainless-retry-count': '0',
  };

  it('replaces every header whose name says secret (auth, key, token, secret, password, cookie, session) and keeps the rest', () => {
    expect(redactHeaders(headers)).toEqual({
      authorization: '[redacted]',
      'x-api-key': '[redacted]',
      'x-goog-api-key': '[redacted]',
      cookie: '[redacted]',
      'proxy-authorization': '[redacted]',
      'content-type': 'application/json',
      'x-claude-code-session-id': '[redacted]',
      'x-auth-token': '[redacted]',
      'openai-api-key': '[redacted]',
      'x-stainless-retry-count': '0',
    });
    expect(redactHeaders({ 'X-Client-Secret': 's', 'x-db-password': 'p', 'keep-alive': 'timeout=5' })).toEqual({
      'x-client-secret': '[redacted]',
      'x-db-password': '[redacted]',
      'keep-alive': 'timeout=5',
    });
  });

  it('scrubs the values of credential headers from bodies, but not session ids (they are not credentials)', () => {
    const secrets = secretValues({ 'x-auth-token': 'tok-1234567890', 'openai-api-key': 'sk-proj-0987654321', 'x-session-id': 'ses-123456789' });
    expect(secrets).toEqual(expect.arrayContaining(['tok-1234567890', 'sk-proj-0987654321']));
    expect(secrets).not.toContain('ses-123456789');
  });

  it('scrubs secret values that appear elsewhere (a body echoing the key, a ?key= query)', () => {
    const secrets = secretValues(headers, '/v1beta/models/x:generateContent?key=AIzaQueryKey12345');
    expect(secrets).toEqual(expect.arrayContaining(['sk-live-abcdef123456', 'ant-key-987654321', 'AIzaQueryKey12345']));
    expect(scrubSecrets('{"k":"sk-live-abcdef123456","j":"ant-key-987654321"}', secrets)).toBe('{"k":"[redacted]","j":"[redacted]"}');
  });

  it('scrubs a polar session key whole and its secret alone; the session name it carries is kept', () => {
    const key = 'polar-ses_1~Zm9vYmFyYmF6cXV4cXV1eHF1dXgxMjM0NTY3ODkwYWJj';
    const secrets = secretValues({ 'x-api-key': key });
    expect(scrubSecrets(`key ${key} / secret ${key.split('~')[1]} / session ses_1`, secrets)).toBe('key [redacted] / secret [redacted] / session ses_1');
  });

  it('redacts credential query parameters in stored paths', () => {
    expect(redactPath('/v1beta/models/m:streamGenerateContent?alt=sse&key=AIzaSecret')).toBe(
      '/v1beta/models/m:streamGenerateContent?alt=sse&key=%5Bredacted%5D',
    );
    expect(redactPath('/v1/chat/completions')).toBe('/v1/chat/completions');
    expect(redactPath('/v1/x?access_token=abc&client_secret=def&session_id=s1&alt=sse')).toBe(
      '/v1/x?access_token=%5Bredacted%5D&client_secret=%5Bredacted%5D&session_id=%5Bredacted%5D&alt=sse',
    );
  });
});

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
  };

  it('replaces every secret header and keeps the rest', () => {
    expect(redactHeaders(headers)).toEqual({
      authorization: '[redacted]',
      'x-api-key': '[redacted]',
      'x-goog-api-key': '[redacted]',
      cookie: '[redacted]',
      'proxy-authorization': '[redacted]',
      'content-type': 'application/json',
      'x-claude-code-session-id': 'abc',
    });
  });

  it('scrubs secret values that appear elsewhere (a body echoing the key, a ?key= query)', () => {
    const secrets = secretValues(headers, '/v1beta/models/x:generateContent?key=AIzaQueryKey12345');
    expect(secrets).toEqual(expect.arrayContaining(['sk-live-abcdef123456', 'ant-key-987654321', 'AIzaQueryKey12345']));
    expect(scrubSecrets('{"k":"sk-live-abcdef123456","j":"ant-key-987654321"}', secrets)).toBe('{"k":"[redacted]","j":"[redacted]"}');
  });

  it('redacts credential query parameters in stored paths', () => {
    expect(redactPath('/v1beta/models/m:streamGenerateContent?alt=sse&key=AIzaSecret')).toBe(
      '/v1beta/models/m:streamGenerateContent?alt=sse&key=%5Bredacted%5D',
    );
    expect(redactPath('/v1/chat/completions')).toBe('/v1/chat/completions');
  });
});

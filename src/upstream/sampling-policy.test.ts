import { describe, expect, it } from 'vitest';
import type { CanonicalRequest } from '../core/chat.js';
import { openaiChatCodec } from '../providers/openai-chat/index.js';
import { parseAsBytes, prepareFromBytes } from '../proxy/wire-body.js';
import { createVllmUpstream } from './vllm/index.js';
import { NemoRlUpstream } from './nemo-rl/index.js';
import { SAMPLING_ATTACK } from '../../test/support/sampling-attack.js';
import { anthropicMessagesCodec } from '../providers/anthropic-messages/index.js';
import { templateKwargs } from './tito/chain-memory.js';
import { nemoRlDialect } from './nemo-rl/index.js';
import { applySamplingPolicy, effectivePolicy, offPolicyReason, PASS_THROUGH, samplingPolicy, type SamplingRecord } from './sampling-policy.js';
import { googleGenerateContentCodec } from '../providers/google-generate-content/index.js';
import { openaiResponsesCodec } from '../providers/openai-responses/index.js';
import { normalizeRequest } from '../providers/normalize.js';
import type { ProviderCodec } from '../providers/types.js';
import { PolarError } from '../core/errors.js';

/** The attack, with template kwargs that also turn thinking off. */
const ATTACK = { ...SAMPLING_ATTACK, logits_processors: ['x'], chat_template_kwargs: { enable_thinking: false, custom: 1 } };

function request(extra: Record<string, unknown>): CanonicalRequest {
  return {
    requestedModel: 'm',
    stream: false,
    body: { messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f' } }], max_tokens: 64, stop: ['END'], ...extra },
    client: { logprobs: false, tokenIds: false, includeUsage: false },
  };
}

describe('sampling policy', () => {
  it('trainer: only the allow-list passes, sampling is the trainer pair with neutral extras, and what was dropped is named', () => {
    const req = request(ATTACK);
    const { req: pinned, dropped } = applySamplingPolicy(req, samplingPolicy('trainer', 'vllm', 0.6, 0.95), 'vllm');
    expect(pinned.body).toEqual({
      messages: req.body.messages,
      tools: req.body.tools,
      max_tokens: 64,
      stop: ['END'],
      tool_choice: 'auto',
      temperature: 0.6,
      top_p: 0.95,
      top_k: -1,
      min_p: 0,
      presence_penalty: 0,
      frequency_penalty: 0,
      repetition_penalty: 1,
    });
    // The same values, not copies: the byte path copies them from the request's bytes.
    expect(pinned.body.messages).toBe(req.body.messages);
    expect(pinned.body.tools).toBe(req.body.tools);
    for (const k of Object.keys(ATTACK)) expect(dropped).toContain(k);
    // The request itself is untouched (the record keeps what the harness sent).
    expect(req.body.logit_bias).toEqual({ '1234': 100 });
  });

  it('trainer: the token-in kinds keep no tool_choice-free extras either, and openai gets no vLLM-only fields', () => {
    const tito = applySamplingPolicy(request(ATTACK), samplingPolicy('trainer', 'vllm-tito'), 'vllm-tito').req.body;
    expect(tito).toMatchObject({ temperature: 1, top_p: 1, top_k: -1, min_p: 0 });
    expect(tito).not.toHaveProperty('chat_template_kwargs');
    expect(tito).not.toHaveProperty('seed');
    const openai = applySamplingPolicy(request(ATTACK), samplingPolicy('trainer', 'openai'), 'openai').req.body;
    expect(openai).toMatchObject({ temperature: 1, top_p: 1 });
    expect(openai).not.toHaveProperty('top_k');
  });

  it('a session sending the trainer pair itself has nothing dropped', () => {
    const { dropped } = applySamplingPolicy(request({ temperature: 1, top_p: 1 }), samplingPolicy('trainer', 'vllm'), 'vllm');
    expect(dropped).toEqual([]);
  });

  it('nemo-rl is always pinned, whatever the command asked', () => {
    expect(samplingPolicy('pass-through', 'nemo-rl').mode).toBe('trainer');
    expect(samplingPolicy('pass-through', 'vllm').mode).toBe('pass-through');
  });

  it('a proxy in front of nemo-rl records its calls as pinned to the adapter’s pair, even when told pass-through', async () => {
    const nemo = new NemoRlUpstream({ baseUrl: 'http://127.0.0.1:9', temperature: 0.6, topP: 0.95 });
    const off = new NemoRlUpstream({ baseUrl: 'http://127.0.0.1:9', thinking: 'off' });
    try {
      expect(effectivePolicy(PASS_THROUGH, nemo)).toEqual({ mode: 'trainer', temperature: 0.6, topP: 0.95, thinking: 'template' });
      expect(effectivePolicy(PASS_THROUGH, off).thinking).toBe('off');
      expect(effectivePolicy(undefined, { pinnedSampling: undefined })).toBe(PASS_THROUGH);
    } finally {
      await off.close();
      await nemo.close();
    }
  });

  it('pass-through: the request goes as sent; the fields that change sampling or the prompt are listed', () => {
    const req = request(ATTACK);
    const { req: sent, offPolicy } = applySamplingPolicy(req, PASS_THROUGH, 'vllm');
    expect(sent).toBe(req);
    expect(offPolicy).toEqual(
      expect.arrayContaining(['temperature', 'top_p', 'top_k', 'logit_bias', 'guided_regex', 'use_beam_search', 'ignore_eos', 'chat_template', 'tool_choice']),
    );
    // Neutral values and the thinking switch alone are not off-policy.
    const quiet = applySamplingPolicy(request({ temperature: 1, top_k: -1, n: 1, chat_template_kwargs: { enable_thinking: true } }), PASS_THROUGH, 'vllm');
    expect(quiet.offPolicy).toEqual([]);
    // A token-in upstream forwards only the sampling numbers and template kwargs.
    expect(applySamplingPolicy(request({ logit_bias: { 1: 5 }, top_k: 3 }), PASS_THROUGH, 'vllm-tito').offPolicy).toEqual(['top_k']);
  });

  it('judges a recorded call against the run', () => {
    const rec = (over: Partial<SamplingRecord>): SamplingRecord => ({
      policy: 'trainer',
      temperature: 1,
      top_p: 1,
      top_k: -1,
      max_tokens: 64,
      seed: null,
      dropped: [],
      off_policy: [],
      ...over,
    });
    expect(offPolicyReason(null)).toBeNull();
    expect(offPolicyReason(rec({}))).toBeNull();
    expect(offPolicyReason(rec({ dropped: ['logit_bias'] }))).toBeNull();
    expect(offPolicyReason(rec({ policy: 'pass-through', off_policy: ['logit_bias'] }))).toMatch(/logit_bias/);
    expect(offPolicyReason(rec({ temperature: 0.6 }), { temperature: 1, topP: 1 })).toMatch(/temperature 0.6 \(run: 1\)/);
    expect(offPolicyReason(rec({ temperature: 0.6 }))).toBeNull();
    expect(offPolicyReason(rec({ policy: 'pass-through', temperature: null, top_p: null }))).toBeNull();
    // A pass-through call is judged by the pair its capture was given (`polar proxy --temperature 0.6`), not by 1.0.
    const reference = { temperature: 0.6, top_p: 0.95 };
    expect(offPolicyReason(rec({ policy: 'pass-through', temperature: 0.6, top_p: 0.95, reference }))).toBeNull();
    expect(offPolicyReason(rec({ policy: 'pass-through', temperature: 1, top_p: 0.95, reference }))).toMatch(/temperature 1 \(run: 0.6\)/);
  });

  it('the byte path still builds a trainer-pinned vLLM body from the request bytes', async () => {
    const upstream = createVllmUpstream({ baseUrl: 'http://127.0.0.1:9' });
    try {
      const text = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'héllo' }], ...ATTACK });
      const bytes = Buffer.from(text);
      const prepared = prepareFromBytes(parseAsBytes(bytes), openaiChatCodec, upstream, {
        path: '/v1/chat/completions',
        contextWindow: null,
        servedModel: 'm',
        call: { id: 'c', sessionId: 's', agentId: 'main' },
        bytes,
        sampling: samplingPolicy('trainer', 'vllm'),
      });
      expect(prepared).not.toBeNull();
      const sent = JSON.parse(prepared!.upstreamReq.bytes!.toString('utf8')) as Record<string, unknown>;
      expect(sent.messages).toEqual([{ role: 'user', content: 'héllo' }]);
      for (const k of ['logit_bias', 'guided_regex', 'use_beam_search', 'ignore_eos', 'chat_template', 'continue_final_message', 'priority', 'seed'])
        expect(sent).not.toHaveProperty(k);
      expect(sent).toMatchObject({ temperature: 1, top_p: 1, top_k: -1, tool_choice: 'auto', return_token_ids: true });
      expect(prepared!.sampling).toMatchObject({ policy: 'trainer', temperature: 1, top_p: 1, top_k: -1, seed: null });
      expect(prepared!.sampling.dropped).toEqual(expect.arrayContaining(['logit_bias', 'seed', 'tool_choice']));
    } finally {
      await upstream.close();
    }
  });

  describe('the thinking switch', () => {
    const withSwitch = (thinking: boolean | undefined): CanonicalRequest => ({ ...request({}), ...(thinking !== undefined ? { thinking } : {}) });

    it('trainer: the session’s switch is replaced by --thinking and, when it differed, listed as dropped', () => {
      const off = applySamplingPolicy(withSwitch(true), samplingPolicy('trainer', 'vllm', undefined, undefined, 'off'), 'vllm');
      expect(off.req.thinking).toBe(false);
      expect(off.dropped).toContain('thinking');
      const on = applySamplingPolicy(withSwitch(false), samplingPolicy('trainer', 'vllm-tito', undefined, undefined, 'on'), 'vllm-tito');
      expect(on.req.thinking).toBe(true);
      expect(on.dropped).toContain('thinking');
      // `template` (the default): no switch is sent at all, whatever the session asked.
      const template = applySamplingPolicy(withSwitch(false), samplingPolicy('trainer', 'vllm'), 'vllm');
      expect(template.req).not.toHaveProperty('thinking');
      expect(template.dropped).toContain('thinking');
      // The same value, or no switch from the session: nothing dropped.
      expect(applySamplingPolicy(withSwitch(false), samplingPolicy('trainer', 'vllm', undefined, undefined, 'off'), 'vllm').dropped).toEqual([]);
      expect(applySamplingPolicy(withSwitch(undefined), samplingPolicy('trainer', 'vllm'), 'vllm').dropped).toEqual([]);
      const set = applySamplingPolicy(withSwitch(undefined), samplingPolicy('trainer', 'vllm', undefined, undefined, 'on'), 'vllm');
      expect(set.req.thinking).toBe(true);
      expect(set.dropped).toEqual([]);
    });

    it('trainer: every adapter renders with the pinned switch (vLLM and nemo-rl bodies, the token-in template kwargs)', async () => {
      const vllm = createVllmUpstream({ baseUrl: 'http://127.0.0.1:9' });
      try {
        const pinned = applySamplingPolicy(withSwitch(true), samplingPolicy('trainer', 'vllm', undefined, undefined, 'off'), 'vllm').req;
        expect(vllm.prepare(pinned, 'm').body.chat_template_kwargs).toEqual({ enable_thinking: false });
        const template = applySamplingPolicy(withSwitch(true), samplingPolicy('trainer', 'vllm'), 'vllm').req;
        expect(vllm.prepare(template, 'm').body).not.toHaveProperty('chat_template_kwargs');
      } finally {
        await vllm.close();
      }
      // The nemo-rl adapter pins on its own too, to its configured switch.
      expect(nemoRlDialect({ baseUrl: 'http://127.0.0.1:9', thinking: 'off' }).body(withSwitch(true), 'm').chat_template_kwargs).toEqual({
        enable_thinking: false,
      });
      expect(nemoRlDialect({ baseUrl: 'http://127.0.0.1:9' }).body(withSwitch(true), 'm')).not.toHaveProperty('chat_template_kwargs');
      // The token-in kinds render with templateKwargs of the pinned request.
      const tito = applySamplingPolicy(withSwitch(false), samplingPolicy('trainer', 'vllm-tito', undefined, undefined, 'on'), 'vllm-tito').req;
      expect(templateKwargs(tito)).toEqual({ enable_thinking: true });
      expect(templateKwargs(applySamplingPolicy(withSwitch(false), samplingPolicy('trainer', 'sglang-tito'), 'sglang-tito').req)).toEqual({});
    });

    it('pass-through keeps the session’s switch, and drops nothing', () => {
      const req = withSwitch(false);
      const { req: sent, dropped, offPolicy } = applySamplingPolicy(req, PASS_THROUGH, 'vllm');
      expect(sent).toBe(req);
      expect(sent.thinking).toBe(false);
      expect(dropped).toEqual([]);
      expect(offPolicy).toEqual([]);
    });

    it('the byte path pins it and records the value rendered', async () => {
      const upstream = createVllmUpstream({ baseUrl: 'http://127.0.0.1:9' });
      try {
        const text = JSON.stringify({
          model: 'm',
          max_tokens: 64,
          thinking: { type: 'enabled', budget_tokens: 1024 },
          messages: [{ role: 'user', content: 'héllo' }],
        });
        const bytes = Buffer.from(text);
        const prepare = (thinking: 'on' | 'off' | 'template') =>
          prepareFromBytes(parseAsBytes(bytes), anthropicMessagesCodec, upstream, {
            path: '/v1/messages',
            contextWindow: null,
            servedModel: 'm',
            call: { id: 'c', sessionId: 's', agentId: 'main' },
            bytes,
            sampling: samplingPolicy('trainer', 'vllm', undefined, undefined, thinking),
          });
        const off = prepare('off');
        expect(off).not.toBeNull();
        const sent = JSON.parse(off!.upstreamReq.bytes!.toString('utf8')) as Record<string, unknown>;
        expect(sent.chat_template_kwargs).toEqual({ enable_thinking: false });
        expect(sent.messages).toEqual([{ role: 'user', content: 'héllo' }]);
        expect(off!.sampling.thinking).toBe(false);
        expect(off!.sampling.dropped).toContain('thinking');
        const template = prepare('template');
        expect(JSON.parse(template!.upstreamReq.bytes!.toString('utf8'))).not.toHaveProperty('chat_template_kwargs');
        expect(template!.sampling.thinking).toBeNull();
        expect(template!.sampling.dropped).toContain('thinking');
      } finally {
        await upstream.close();
      }
    });
  });

  /**
   * Issue 39 (6): besides the top-level fields, a trainer's call must not carry what the policy
   * could steer generation or the server with from inside its messages or its budget.
   */
  describe('messages and the output budget (trainer)', () => {
    const trainer = samplingPolicy('trainer', 'vllm');
    const withMessages = (messages: unknown[], extra: Record<string, unknown> = {}): CanonicalRequest => ({
      ...request(extra),
      body: { ...request(extra).body, messages: messages as CanonicalRequest['body']['messages'] },
    });
    const refusal = (f: () => unknown): PolarError => {
      try {
        f();
      } catch (err) {
        expect(err).toBeInstanceOf(PolarError);
        return err as PolarError;
      }
      throw new Error('not refused');
    };

    it('message keys outside each role’s allow-list are dropped and named, once each; the rest stay the request’s own objects', () => {
      const user = { role: 'user', content: 'hi', name: 'me' };
      const messages = [
        { role: 'system', content: 'rules', tools: [{ type: 'function' }], task: 'x' },
        user,
        { role: 'assistant', content: 'The answer is', prefix: true, reasoning_content: 'r', tool_calls: [], refusal: null },
        { role: 'tool', tool_call_id: 'c1', content: 'ok', prefix: true },
      ];
      const { req: pinned, dropped } = applySamplingPolicy(withMessages(messages), trainer, 'vllm');
      expect(pinned.body.messages).toEqual([
        { role: 'system', content: 'rules' },
        { role: 'user', content: 'hi', name: 'me' },
        { role: 'assistant', content: 'The answer is', reasoning_content: 'r', tool_calls: [], refusal: null },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ]);
      expect(pinned.body.messages[1]).toBe(user);
      expect(dropped).toEqual(['messages[].tools', 'messages[].task', 'messages[].prefix']);
      // The harness's own request is untouched (its record keeps what it sent).
      expect(messages[2]).toHaveProperty('prefix', true);
      // Pass-through sends them as they came.
      expect(applySamplingPolicy(withMessages(messages), PASS_THROUGH, 'vllm').req.body.messages[2]).toHaveProperty('prefix', true);
    });

    it('media named by URL is refused (400), in every form vLLM fetches; inline data goes through', () => {
      const part = (p: Record<string, unknown>) => withMessages([{ role: 'user', content: [{ type: 'text', text: 'look' }, p] }]);
      for (const p of [
        { type: 'image_url', image_url: { url: 'http://169.254.169.254/latest/meta-data/' } },
        { type: 'image_url', image_url: { url: 'file:///etc/passwd' } },
        { type: 'image_url', image_url: { url: '/etc/passwd' } },
        { type: 'image_url', image_url: {} },
        { type: 'input_image', image_url: 'https://attacker.example/x.png' },
        { image_url: 'https://attacker.example/x.png' },
        { type: 'audio_url', audio_url: { url: 'https://attacker.example/a.wav' } },
        { audio_url: 'https://attacker.example/a.wav' },
        { type: 'video_url', video_url: { url: 'https://attacker.example/v.mp4' } },
      ]) {
        const err = refusal(() => applySamplingPolicy(part(p), trainer, 'vllm'));
        expect(err.status, JSON.stringify(p)).toBe(400);
        expect(err.message).toMatch(/messages\[0\]\.content\[1\].*polar forwards media only inline/);
      }
      for (const p of [{ type: 'image_embeds', image_embeds: 'AAAA' }, { prompt_embeds: 'AAAA' }]) {
        expect(refusal(() => applySamplingPolicy(part(p), trainer, 'vllm')).message).toMatch(/not tensors/);
      }
      const inline = part({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } });
      expect(applySamplingPolicy(inline, trainer, 'vllm').req.body.messages).toBe(inline.body.messages);
      expect(applySamplingPolicy(part({ type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } }), trainer, 'vllm').dropped).toEqual([]);
      // A uuid would have vLLM reuse cached media by name, whatever the part holds: dropped.
      const named = applySamplingPolicy(part({ type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' }, uuid: 'other' }), trainer, 'vllm');
      expect((named.req.body.messages[0]!.content as unknown[])[1]).toEqual({ type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } });
      expect(named.dropped).toEqual(['messages[].content[].uuid']);
      // Pass-through forwards the URL as sent (plain capture).
      expect(() => applySamplingPolicy(part({ image_url: 'https://x.example/i.png' }), PASS_THROUGH, 'vllm')).not.toThrow();
    });

    it('each provider’s media by URL is refused, its inline media forwarded', () => {
      const decode = (codec: ProviderCodec, body: unknown, path: string) =>
        applySamplingPolicy(normalizeRequest(codec.decodeRequest(body, { path }), { contextWindow: null }), trainer, 'vllm');
      const anthropic = (source: Record<string, unknown>) =>
        decode(anthropicMessagesCodec, { model: 'm', max_tokens: 64, messages: [{ role: 'user', content: [{ type: 'image', source }] }] }, '/v1/messages');
      expect(refusal(() => anthropic({ type: 'url', url: 'https://attacker.example/x.png' })).status).toBe(400);
      expect(() => anthropic({ type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' })).not.toThrow();
      const gemini = (part: Record<string, unknown>) =>
        decode(googleGenerateContentCodec, { contents: [{ role: 'user', parts: [{ text: 'look' }, part] }] }, '/v1beta/models/m:generateContent');
      expect(refusal(() => gemini({ fileData: { mimeType: 'image/png', fileUri: 'gs://bucket/x.png' } })).status).toBe(400);
      expect(() => gemini({ inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } })).not.toThrow();
      const responses = (url: string) =>
        decode(openaiResponsesCodec, { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: url }] }] }, '/v1/responses');
      expect(refusal(() => responses('https://attacker.example/x.png')).status).toBe(400);
      expect(() => responses('data:image/png;base64,iVBORw0KGgo=')).not.toThrow();
    });

    it('an output budget no server can keep is dropped and named; one over the window, named by normalization, is listed too', () => {
      for (const bad of [-1, 0, 1.5, '100', 1e300]) {
        const { req: pinned, dropped } = applySamplingPolicy(request({ max_tokens: bad }), trainer, 'vllm');
        expect(pinned.body, String(bad)).not.toHaveProperty('max_tokens');
        expect(dropped).toEqual(['max_tokens']);
      }
      const completion = applySamplingPolicy(request({ max_tokens: undefined, max_completion_tokens: -1 }), trainer, 'vllm');
      expect(completion.req.body).not.toHaveProperty('max_completion_tokens');
      expect(completion.dropped).toEqual(['max_completion_tokens']);
      expect(applySamplingPolicy(request({ max_tokens: 64 }), trainer, 'vllm').dropped).toEqual([]);
      const huge = applySamplingPolicy(normalizeRequest(request({ max_tokens: 1_000_000 }), { contextWindow: 40_960 }), trainer, 'vllm');
      expect(huge.req.body).not.toHaveProperty('max_tokens');
      expect(huge.dropped).toEqual(['max_tokens']);
      // Pass-through sends the harness's -1 as it came (the server answers for it).
      expect(applySamplingPolicy(request({ max_tokens: -1 }), PASS_THROUGH, 'vllm').req.body.max_tokens).toBe(-1);
    });

    it('the byte path drops the same keys and records them as text', async () => {
      const upstream = createVllmUpstream({ baseUrl: 'http://127.0.0.1:9' });
      try {
        const text = JSON.stringify({
          model: 'm',
          max_tokens: -1,
          messages: [
            { role: 'user', content: 'héllo' },
            { role: 'assistant', content: 'Sûrement', prefix: true },
          ],
        });
        const bytes = Buffer.from(text);
        const prepared = prepareFromBytes(parseAsBytes(bytes), openaiChatCodec, upstream, {
          path: '/v1/chat/completions',
          contextWindow: null,
          servedModel: 'm',
          call: { id: 'c', sessionId: 's', agentId: 'main' },
          bytes,
          sampling: trainer,
        });
        expect(prepared).not.toBeNull();
        const sent = JSON.parse(prepared!.upstreamReq.bytes!.toString('utf8')) as Record<string, unknown>;
        expect(sent.messages).toEqual([
          { role: 'user', content: 'héllo' },
          { role: 'assistant', content: 'Sûrement' },
        ]);
        expect(sent).not.toHaveProperty('max_tokens');
        expect(prepared!.sampling.dropped).toEqual(['max_tokens', 'messages[].prefix']);
        expect(prepared!.sampling.max_tokens).toBeNull();
      } finally {
        await upstream.close();
      }
    });
  });
});

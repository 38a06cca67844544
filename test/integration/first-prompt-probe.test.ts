import { describe, expect, it } from 'vitest';
import { qwen3ModelDir } from '../../src/core/bundled-tokenizer.js';
import { shellQuote } from '../../src/core/process/shell.js';
import { createCustomHarness } from '../../src/harness/custom.js';
import { findBwrap } from '../../src/sandbox/index.js';
import { probeFirstPrompts } from '../../src/train/first-prompt-probe.js';
import { BUNDLED_QWEN3, loadChatTemplate } from '../../src/upstream/tito/chat-template.js';
import { patient } from '../support/patience.js';

/**
 * The first-prompt probe (train grpo's preflight) runs a harness's first call as two samples of one
 * task. A harness whose first request names its working directory and home: in the bwrap sandbox a
 * rollout uses, both samples see the fixed paths and render one prompt; without it, each names its
 * own folders, and the probe returns where the two renders part.
 */
const AGENT = `const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'cwd ' + process.cwd() + ' home ' + process.env.HOME }, { role: 'user', content: 'go' }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }) });
if (!r.ok) process.exit(3);
await r.json();`;
// Inline, so the sandbox needs nothing but Node (a script under /tmp would not be visible in it).
const harness = createCustomHarness(`${shellQuote(process.execPath)} --input-type=module -e ${shellQuote(AGENT)}`);
const template = loadChatTemplate(BUNDLED_QWEN3, qwen3ModelDir);

describe('the first-prompt probe', () => {
  it.skipIf(!findBwrap())(
    'in the bwrap sandbox: two samples of a harness that names its cwd and home render one prompt',
    { timeout: patient(120_000) },
    async () => {
      const r = await probeFirstPrompts(harness, '/bin/sh', template, { prompt: 'go', sandbox: 'bwrap' });
      expect(r.difference).toBeNull();
      expect(r.tools).toBe(1);
      expect(r.mockTokens).toBe(r.tokens);
    },
  );

  it('without the sandbox: the same harness names each sample its own folders, and the probe shows where', { timeout: patient(120_000) }, async () => {
    const r = await probeFirstPrompts(harness, '/bin/sh', template, { prompt: 'go', sandbox: 'none' });
    expect(r.difference).toMatch(/^--- sample 1 \(its own workspace and session\)\n\+\+\+ sample 2\n@@ line \d+ @@\n/);
    expect(r.difference).toMatch(/^-cwd \S+\/sample-0\/workspace home \S+\/\.polar\/runs\/ses_\w+\/home$/m);
    expect(r.difference).toMatch(/^\+cwd \S+\/sample-1\/workspace home /m);
  });
});

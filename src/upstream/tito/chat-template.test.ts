import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createUpstream } from '../create.js';
import { qwen3ModelDir } from '../../core/bundled-tokenizer.js';
import { BUNDLED_QWEN3, detectToolFormat, loadChatTemplate } from './chat-template.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-template-'));
afterAll(() => removeTree(dir));

/** A model folder with the bundled Qwen3 files, optionally a chat_template.jinja replacing the config's. */
function modelFolder(name: string, jinja?: string): string {
  const folder = path.join(dir, name);
  fs.mkdirSync(folder);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(qwen3ModelDir(), f), path.join(folder, f));
  if (jinja !== undefined) fs.writeFileSync(path.join(folder, 'chat_template.jinja'), jinja);
  return folder;
}

const XML_TEMPLATE = `{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}{%- if m.tool_calls %}{%- for c in m.tool_calls %}
<tool_call>
<function={{ c.function.name }}>
{%- for k, v in c.function.arguments|items %}
<parameter={{ k }}>
{{ v }}
</parameter>{%- endfor %}
</function>
</tool_call>{%- endfor %}{%- endif %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

describe('loadChatTemplate (--tokenizer)', () => {
  const messages = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'a', type: 'function', function: { name: 'ls', arguments: '{"path":"src"}' } }] },
  ];

  it('reads a model folder, its tokenizer.json, or bundled:qwen3 alike', () => {
    const folder = modelFolder('qwen3');
    const texts = [folder, path.join(folder, 'tokenizer.json'), path.join(folder, 'tokenizer_config.json')].map((p) =>
      loadChatTemplate(p).render(messages, { addGenerationPrompt: true, kwargs: { enable_thinking: false } }),
    );
    expect(new Set(texts).size).toBe(1);
    const bundled = loadChatTemplate(BUNDLED_QWEN3, qwen3ModelDir);
    expect(bundled.render(messages, { addGenerationPrompt: true, kwargs: { enable_thinking: false } })).toBe(texts[0]);
    // vLLM renders tool arguments as objects: the template re-serialises them.
    expect(texts[0]).toContain('{"name": "ls", "arguments": {"path": "src"}}');
    expect(texts[0]!.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
  });

  it('prefers chat_template.jinja, and detects the Qwen3-Coder XML tool format from it', () => {
    const folder = modelFolder('coder', XML_TEMPLATE);
    const t = loadChatTemplate(path.join(folder, 'chat_template.jinja'));
    expect(t.toolFormat).toBe('qwen3-coder');
    expect(t.reasons).toBe(false);
    expect(t.turnEnd.text).toBe('<|im_end|>');
    expect(t.render(messages, { addGenerationPrompt: false })).toMatch(/<function=ls><parameter=path>\nsrc\n<\/parameter>/);
    expect(detectToolFormat('{{ "<tool_call>" }}')).toBe('hermes');
    expect(detectToolFormat('{{ messages }}')).toBeNull();
  });

  it('says what is missing', async () => {
    expect(() => loadChatTemplate(path.join(dir, 'nope'))).toThrow(/no such file or folder/);
    const empty = path.join(dir, 'empty');
    fs.mkdirSync(empty);
    expect(() => loadChatTemplate(empty)).toThrow(/no tokenizer.json/);
    const noTemplate = modelFolder('no-template');
    const config = JSON.parse(fs.readFileSync(path.join(noTemplate, 'tokenizer_config.json'), 'utf8'));
    delete config.chat_template;
    fs.writeFileSync(path.join(noTemplate, 'tokenizer_config.json'), JSON.stringify(config));
    expect(() => loadChatTemplate(noTemplate)).toThrow(/no chat template/);
    await expect(createUpstream('vllm-tito', { baseUrl: 'http://127.0.0.1:9' })).rejects.toThrow(/--tokenizer/);
    await expect(createUpstream('sglang-tito', { baseUrl: 'http://127.0.0.1:9', tokenizer: BUNDLED_QWEN3, toolParser: 'mistral' })).rejects.toThrow(
      /--tool-parser/,
    );
  });
});

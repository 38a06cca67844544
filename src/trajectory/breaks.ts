import type { TokenIds } from '../core/tokens.js';
import { commonPrefixLength, numberArray } from '../core/tokens.js';
import type { BreakClass, TokenText } from './types.js';

/**
 * Why `prompt` does not extend `trace` (the previous call's prompt, `previousPromptLength` long,
 * then what it sampled). Whitespace-only differences in the re-rendered answer are `template`. A difference inside the previous prompt means the history was changed.
 * A difference in the previous answer is compared as the re-render of that answer: the slice of
 * `prompt` from the same start up to where the two agree again on what follows is not known, so
 * the next `window` tokens are compared, which covers the answer and its end-of-turn markup.
 */
export function classifyBreak(trace: TokenIds, previousPromptLength: number, prompt: TokenIds, text?: TokenText): { class: BreakClass; position: number } {
  const position = commonPrefixLength(trace, prompt);
  if (position < previousPromptLength) return { class: 'rewrite', position };
  if (!text) return { class: 'other', position };
  const sampled = numberArray(trace.slice(previousPromptLength));
  const rendered = numberArray(prompt.slice(previousPromptLength, previousPromptLength + sampled.length + 16));
  const specials = (ids: readonly number[]) => ids.filter((id) => text.isSpecial(id));
  const sampledText = text.decode(sampled.filter((id) => !text.isSpecial(id)));
  const renderedText = text.decode(rendered.filter((id) => !text.isSpecial(id)));
  if (renderedText.startsWith(sampledText) || sampledText.startsWith(renderedText)) {
    // Same words: either the markup around them differs, or only the split into tokens does. The
    // re-render can be shorter or longer than the sampled ids, so the special tokens are compared
    // in order, the sampled ones against the start of the rendered ones.
    const mine = specials(sampled);
    const theirs = specials(rendered);
    return { class: mine.every((id, i) => theirs[i] === id) ? 'retoken' : 'template', position };
  }
  // The same words with other whitespace around them is the template's doing, not a changed
  // history: Qwen3's template puts "\n" before <tool_call> whether or not the model sampled one,
  // and re-serialises the call's JSON with its own spacing.
  const bare = (t: string) => t.replace(/\s+/g, '');
  const a = bare(sampledText);
  const b = bare(renderedText);
  if (a.length > 0 && (b.startsWith(a) || a.startsWith(b))) return { class: 'template', position };
  return { class: 'rewrite', position };
}

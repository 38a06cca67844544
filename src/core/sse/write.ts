import type { SseEvent } from './parse.js';

/**
 * Serialises one event. `data` is split on every line ending into `data:` lines so a payload with
 * newlines cannot end the event early; `event` and `id` must not contain CR or LF (they would
 * inject fields), so that is refused rather than escaped.
 */
export function formatSseEvent(event: SseEvent): string {
  let out = '';
  if (event.event !== undefined) out += `event: ${singleLine('event', event.event)}\n`;
  if (event.id !== undefined) out += `id: ${singleLine('id', event.id)}\n`;
  if (event.retry !== undefined) out += `retry: ${Math.floor(event.retry)}\n`;
  const data = event.data;
  if (data.indexOf('\n') < 0 && data.indexOf('\r') < 0) {
    out += `data: ${data}\n\n`;
  } else {
    for (const line of data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
    out += '\n';
  }
  return out;
}

/** A comment line: ignored by every SSE client, but it resets byte-idle watchdogs. */
export function formatSseComment(text: string): string {
  return `: ${text.replace(/[\r\n]+/g, ' ')}\n\n`;
}

function singleLine(field: string, value: string): string {
  if (/[\r\n]/.test(value)) throw new TypeError(`SSE ${field} must not contain a line break`);
  return value;
}

// The loader-thread half of count-modules.mjs.
import fs from 'node:fs';

let log;

export function initialize(data) {
  log = data.log;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (!resolved.url.startsWith('node:')) fs.appendFileSync(log, `${resolved.url}\n`);
  return resolved;
}

import fs from 'node:fs';

/** The package version, read from package.json next to dist/ (or src/ when run from source). */
export function polarVersion(): string {
  const file = new URL('../../package.json', import.meta.url);
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}

/** Byte-level facts of JSON text, for scanners that read a body's bytes without parsing it. */

/** JSON's whitespace: space, line feed, carriage return, tab. */
export function isJsonSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Whether the byte at `at` is escaped: preceded by an odd run of backslashes (so a quote there is inside a string). */
export function isEscaped(bytes: Buffer, at: number): boolean {
  let backslashes = 0;
  for (let i = at - 1; i >= 0 && bytes[i] === 0x5c; i--) backslashes++;
  return backslashes % 2 === 1;
}

/**
 * `text` as one line of at most `max` characters, an ellipsis where it was cut: a progress line or a
 * table cell whose whole text is kept elsewhere (the database, `rollout show`). A sample's error
 * leads with its cause (core/process/failure.ts), so the cut takes the detail, not the cause.
 */
export function clip(text: string, max: number): string {
  const line = text.replace(/\s*\n\s*/g, ' | ');
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

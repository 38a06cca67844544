/**
 * The parent environment a harness inherits: an allow-list, not everything. Provider keys and base
 * URLs in the user's shell (ANTHROPIC_API_KEY, OPENAI_BASE_URL, …) must not leak into a run, or the
 * harness might call a real provider instead of polar.
 */
const ALLOWED = [
  'PATH',
  'LANG',
  'LC_ALL',
  'LC_CTYPE',
  'TERM',
  'COLORTERM',
  'TZ',
  'TMPDIR',
  'SHELL',
  'USER',
  'LOGNAME',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'NO_COLOR',
  'FORCE_COLOR',
];

export function baseEnvironment(parent: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ALLOWED) {
    const value = parent[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

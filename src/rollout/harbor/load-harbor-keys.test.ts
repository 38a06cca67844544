import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readHarborSuite } from './load.js';
import { loadNotices } from './trial.js';
import { removeTree } from '../../../test/support/remove-tree.js';

/**
 * Valid Harbor tasks load (issue 41, item 3): polar calls a task invalid only for what Harbor's own
 * loader rejects (models/task/config.py at the fork snapshot 15735640198/harbor f276a3b). Keys its
 * models do not define are ignored, with a notice, as pydantic ignores them (no model sets `extra`).
 */
const made: string[] = [];
afterAll(() => {
  for (const d of made) removeTree(d);
});

/** One task folder per entry, each with this task.toml and the usual files. */
function suite(tomls: Record<string, string>) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-harbor-keys-'));
  made.push(root);
  for (const [name, toml] of Object.entries(tomls)) {
    const files = {
      'task.toml': toml,
      'instruction.md': 'do it',
      'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
      'tests/test.sh': 'exit 0\n',
    };
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, name, file)), { recursive: true });
      fs.writeFileSync(path.join(root, name, file), text);
    }
  }
  const loaded = readHarborSuite(root);
  const harbor = (id: string) => loaded.tasks.find((t) => t.id === id)?.harbor;
  const problems = loaded.invalid.flatMap((t) => t.problems).join('\n');
  return { loaded, harbor, problems };
}

describe('task.toml keys Harbor accepts load', () => {
  it('a top-level key TaskConfig does not define is ignored, with a notice naming it', () => {
    const { loaded, harbor, problems } = suite({ extra: 'version = "1.0"\ncanary = "abc"\n[difficulty]\nlevel = 2\n' });
    expect(problems).toBe('');
    expect(harbor('extra')!.ignored).toEqual([
      'task.toml, field "canary": ignored, as Harbor\'s TaskConfig ignores keys it does not define',
      'task.toml, field "difficulty": ignored, as Harbor\'s TaskConfig ignores keys it does not define',
    ]);
    expect(loadNotices(loaded.tasks)[0]).toBe(
      'notice: task extra: task.toml, field "canary": ignored, as Harbor\'s TaskConfig ignores keys it does not define',
    );
  });

  it('network_mode = "allowlist" with allowed_hosts loads and runs with no network, said in a notice; a bad host is refused as Harbor refuses it', () => {
    const { loaded, harbor, problems } = suite({
      allow: 'version = "1.0"\n[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["PyPI.org", "*.pythonhosted.org"]\n',
      'verifier-allow': 'version = "1.0"\n[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["github.com"]\n',
      'bad-host': 'version = "1.0"\n[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org:443", "a*.b"]\n',
      'hosts-alone': 'version = "1.0"\n[agent]\nallowed_hosts = ["pypi.org"]\n',
    });
    expect(harbor('allow')).toMatchObject({
      agentNetwork: 'none',
      verifierNetwork: 'none',
      allowlists: [{ table: 'environment', hosts: ['pypi.org', '*.pythonhosted.org'] }],
    });
    expect(harbor('verifier-allow')).toMatchObject({ verifierNetwork: 'none', allowlists: [{ table: 'verifier', hosts: ['github.com'] }] });
    expect(loadNotices(loaded.tasks)).toContain(
      'notice: task allow: [environment] network_mode = "allowlist" (pypi.org, *.pythonhosted.org) runs with no network: polar cannot reach hosts by name from its sandbox yet',
    );
    expect(problems).toMatch(/bad-host\/task\.toml, field "environment\.allowed_hosts": "pypi\.org:443" is not a host name/);
    expect(problems).toMatch(/bad-host\/task\.toml, field "environment\.allowed_hosts": "a\*\.b" is not a host name/);
    expect(problems).toMatch(/hosts-alone\/task\.toml, field "agent\.allowed_hosts": only valid with network_mode = "allowlist".*config\.py:101-116/);
  });

  it('[[environment.mcp_servers]] loads into mcpServers ("http" read as streamable-http); one Harbor rejects is refused', () => {
    const { harbor, problems } = suite({
      mcp: 'version = "1.0"\n[[environment.mcp_servers]]\nname = "fs"\ntransport = "stdio"\ncommand = "mcp-fs"\nargs = ["/app"]\n[[environment.mcp_servers]]\nname = "web"\ntransport = "http"\nurl = "http://mcp:8000/mcp"\n',
      'mcp-no-url': 'version = "1.0"\n[[environment.mcp_servers]]\nname = "web"\n',
      'mcp-empty': 'version = "1.0"\n[environment]\nmcp_servers = []\n',
    });
    expect(harbor('mcp')!.mcpServers).toEqual([
      { name: 'fs', transport: 'stdio', command: 'mcp-fs', args: ['/app'] },
      { name: 'web', transport: 'streamable-http', url: 'http://mcp:8000/mcp', args: [] },
    ]);
    expect(harbor('mcp-empty')!.mcpServers).toBeUndefined();
    expect(problems).toMatch(/mcp-no-url\/task\.toml, field "environment\.mcp_servers\[0\]\.url": required for transport "sse"/);
  });

  it('gpus and gpu_types load (gpus = 0 asks for none); a negative count is refused', () => {
    const { harbor, problems } = suite({
      gpu: 'version = "1.0"\n[environment]\ngpus = 1\ngpu_types = ["H100", "A100"]\n',
      none: 'version = "1.0"\n[environment]\ngpus = 0\nstorage_mb = 10240\n',
      negative: 'version = "1.0"\n[environment]\ngpus = -1\n',
    });
    expect(harbor('gpu')).toMatchObject({ gpus: 1, gpuTypes: ['H100', 'A100'] });
    expect(harbor('none')!.gpus).toBeUndefined();
    expect(problems).toMatch(/negative\/task\.toml, field "environment\.gpus": a whole number of GPUs/);
  });

  it('[environment] env, os, tpu and skills_dir load (polar names them unsupported or unverifiable); values Harbor rejects are refused', () => {
    const { harbor, problems } = suite({
      platform:
        'version = "1.0"\n[environment]\nos = "Windows"\nskills_dir = "/skills"\n[environment.env]\nGREETER = "hi"\n[environment.tpu]\ntype = "v6e"\ntopology = "2x4"\n',
      linux: 'version = "1.0"\n[environment]\nos = "linux"\n[environment.env]\n',
      'bad-platform': 'version = "1.0"\n[environment]\nos = "beos"\ntpu = { type = "v4", topology = "big" }\n',
    });
    expect(harbor('platform')).toMatchObject({ windows: true, skillsDir: '/skills', environmentEnv: { GREETER: 'hi' }, tpu: 'v6e 2x4' });
    expect(harbor('linux')).not.toHaveProperty('windows');
    expect(harbor('linux')).not.toHaveProperty('environmentEnv');
    expect(problems).toMatch(/bad-platform\/task\.toml, field "environment\.os": "linux" or "windows"/);
    expect(problems).toMatch(/bad-platform\/task\.toml, field "environment\.tpu": a table with type and topology/);
  });

  it("a compose `service` on an artifact and a [[verifier.collect]] hook is kept (running it is the compose environment's); unknown keys are ignored", () => {
    const { harbor, problems } = suite({
      service:
        'version = "1.0"\nartifacts = [{ source = "/var/lib/db/dump.sql", service = "db" }, { source = "/app/out", service = "main", colour = 1 }]\n[[verifier.collect]]\ncommand = "pg_dump > /var/lib/db/dump.sql"\nservice = "db"\nwhen = "later"\n',
    });
    expect(problems).toBe('');
    expect(harbor('service')!.artifacts).toEqual([
      { source: '/var/lib/db/dump.sql', destination: null, exclude: [], service: 'db' },
      { source: '/app/out', destination: null, exclude: [], service: 'main' },
    ]);
    expect(harbor('service')!.collect).toEqual([{ command: 'pg_dump > /var/lib/db/dump.sql', timeoutSec: 60, service: 'db' }]);
    expect(harbor('service')!.ignored).toEqual([
      'task.toml, field "artifacts[1].colour": ignored, as Harbor\'s ArtifactConfig ignores keys it does not define',
      'task.toml, field "verifier.collect[0].when": ignored, as Harbor\'s VerifierCollectConfig ignores keys it does not define',
    ]);
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dockerIgnored, readDockerfile } from './dockerfile.js';
import { readHarborTasks } from './load.js';
import { carriedPaths } from './verifier-config.js';
import { buildStartingState, resolveEnv } from './trial.js';
import { loadTasks } from '../load-tasks.js';
import { harnessNetwork, verifierNetwork } from '../sandboxing.js';
import { DEFAULT_LIMITS, type SandboxSettings } from '../../sandbox/index.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const FIXTURES = path.resolve(import.meta.dirname, '..', '..', '..', 'fixtures', 'harbor');

function dataset(tasks: Record<string, Record<string, string>>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-harbor-'));
  for (const [name, files] of Object.entries(tasks)) {
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, name, file)), { recursive: true });
      fs.writeFileSync(path.join(root, name, file), text);
    }
  }
  return root;
}

describe('Harbor task folders', () => {
  it('reads the fixture dataset: both task.toml schemas, WORKDIR, copies, timeouts, network, metadata', () => {
    const tasks = loadTasks(FIXTURES);
    expect(tasks.map((t) => t.id)).toEqual([
      'broken-oracle',
      'csv-to-json',
      'js-fix-slugify',
      'network-setup',
      'partial-credit',
      'py-fix-median',
      'separate-word-count',
    ]);
    const js = tasks.find((t) => t.id === 'js-fix-slugify')!;
    // schema 1.1: [task].name names it; the instruction's leading canary line is not the agent's.
    expect(js.harbor!.name).toBe('polar/js-fix-slugify');
    expect(js.prompt.startsWith('`node test.js` fails')).toBe(true);
    expect(js.harbor!.copies.map((c) => c.to)).toEqual(['slugify.js', 'test.js', 'package.json']);
    expect(js.harbor!.agentNetwork).toBe('none');
    expect(js.harbor!.skipped).toEqual(['RUN npm install --omit=dev']);
    const py = tasks.find((t) => t.id === 'py-fix-median')!;
    expect(py).toMatchObject({ timeout: 240, evaluator: { type: 'harbor', timeout: 60 }, metadata: { difficulty: 'easy' } });
    expect(py.harbor!.workdir).toBe('/app');
    expect(py.harbor!.copies).toEqual([{ from: path.join(FIXTURES, 'py-fix-median', 'environment', 'app'), to: '', dir: true }]);
    const net = tasks.find((t) => t.id === 'network-setup')!;
    expect(net.network).toBe('host');
    expect(net.harbor!.skipped.join('\n')).toMatch(/RUN pip install[\s\S]*ADD https:/);
    // schema 1.3, graded in Harbor's separate verifier environment: its image from tests/, one artifact.
    const sep = tasks.find((t) => t.id === 'separate-word-count')!.harbor!;
    expect(sep).toMatchObject({
      verifierMode: 'separate',
      verifierNetwork: 'none',
      artifacts: [{ source: '/app/counts.json', destination: null, exclude: [] }],
    });
    expect(sep.separateVerifier).toMatchObject({
      dockerfile: path.join(FIXTURES, 'separate-word-count', 'tests', 'Dockerfile'),
      inherited: false,
      image: null,
    });
    for (const t of tasks.filter((x) => x.id !== 'separate-word-count')) expect(t.harbor!.verifierMode, t.id).toBeNull();
    // No test.sh or solve.sh is part of what the agent's workspace is built from.
    for (const t of tasks) for (const c of t.harbor!.copies) expect(c.from.startsWith(path.join(t.harbor!.dir, 'environment'))).toBe(true);
  });

  it('reads [environment].memory_mb (or Harbor\'s older memory = "2G") and [agent]/[verifier].user; refuses what Harbor would', () => {
    const task = (toml: string) => ({
      'task.toml': `version = "1.0"\n${toml}`,
      'instruction.md': 'x',
      'environment/Dockerfile': 'FROM a\n',
      'tests/test.sh': '',
    });
    const root = dataset({
      mb: task('[environment]\nmemory_mb = 512\n[agent]\nuser = "nobody"\n[verifier]\nuser = 1000\n'),
      legacy: task('[environment]\nmemory = "2G"\n'),
      both: task('[environment]\nmemory = "512M"\nmemory_mb = 512\n'),
      none: task(''),
    });
    const read = Object.fromEntries(readHarborTasks(root).map((t) => [t.id, t.harbor!]));
    expect(read.mb).toMatchObject({ memoryBytes: 512 * 1024 ** 2, agentUser: 'nobody', verifierUser: '1000' });
    expect(read.legacy!.memoryBytes).toBe(2048 * 1024 ** 2);
    expect(read.both!.memoryBytes).toBe(512 * 1024 ** 2);
    expect(read.none).not.toHaveProperty('memoryBytes');
    expect(read.none).not.toHaveProperty('agentUser');
    removeTree(root);
    const bad = dataset({
      conflict: task('[environment]\nmemory = "1G"\nmemory_mb = 512\n'),
      size: task('[environment]\nmemory = "lots"\n'),
      zero: task('[environment]\nmemory_mb = 0\n'),
      user: task('[agent]\nuser = "a b; rm -rf /"\n'),
    });
    let message = '';
    try {
      readHarborTasks(bad);
    } catch (err) {
      message = String(err);
    }
    expect(message).toMatch(/environment\.memory.*1024 MB conflicts with memory_mb = 512/);
    expect(message).toMatch(/environment\.memory.*a size such as "2G"/);
    expect(message).toMatch(/environment\.memory_mb.*a positive whole number/);
    expect(message).toMatch(/agent\.user.*a user name or a uid/);
    removeTree(bad);
  });

  it("reads [environment].cpus for a container's --cpus, and refuses one that is not a positive number", () => {
    const task = (cpus: string) => ({
      'task.toml': `version = "1.0"\n[environment]\ncpus = ${cpus}\n`,
      'instruction.md': 'x',
      'environment/Dockerfile': 'FROM a\n',
      'tests/test.sh': '',
    });
    const root = dataset({ two: task('2'), half: task('0.5') });
    expect(Object.fromEntries(readHarborTasks(root).map((t) => [t.id, t.harbor!.cpus]))).toEqual({ half: 0.5, two: 2 });
    removeTree(root);
    const bad = dataset({ zero: task('0') });
    expect(() => readHarborTasks(bad)).toThrow(/environment\.cpus.*a positive number/);
    removeTree(bad);
  });

  it('reports every problem of every task at once, with file and field, before anything starts', () => {
    const root = dataset({
      'bad-toml': { 'task.toml': 'version = "1.0"\n[verifier\n', 'instruction.md': 'x', 'environment/Dockerfile': 'FROM a\n', 'tests/test.sh': '' },
      'bad-fields': {
        'task.toml':
          'version = "1.0"\ncolour = 1\n[verifier]\ntimeout_sec = -1\n[agent]\ntimeout_sec = "long"\n[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["https://pypi.org"]\n',
        'instruction.md': '',
        'environment/Dockerfile': 'FROM a\nWORKDIR /app\nCOPY missing.txt /app/\n',
      },
      'no-dockerfile': { 'task.toml': 'version = "1.0"\n', 'instruction.md': 'do it', 'tests/test.sh': '' },
      'not-a-task': { 'README.md': 'ignored: no task.toml' },
    });
    let message = '';
    try {
      readHarborTasks(root);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/nothing was started/);
    for (const want of [
      /bad-toml\/task\.toml: not valid TOML/,
      /bad-fields\/instruction\.md: empty/,
      /bad-fields\/tests\/test\.sh: missing/,
      /bad-fields\/task\.toml, field "verifier\.timeout_sec": seconds/,
      /bad-fields\/task\.toml, field "agent\.timeout_sec": seconds/,
      /bad-fields\/task\.toml, field "environment\.allowed_hosts": "https:\/\/pypi\.org" is not a host name.*config\.py:58-95/,
      /bad-fields\/environment\/Dockerfile, field "line 3": missing\.txt: no such file/,
      /no-dockerfile\/environment\/Dockerfile: missing/,
    ]) {
      expect(message).toMatch(want);
    }
    expect(message).not.toMatch(/not-a-task/);
    // A key TaskConfig does not define is ignored (pydantic's default), and "allowlist" loads.
    expect(message).not.toMatch(/colour|network_mode/);
  });

  it('reads a Dockerfile as the host can take it: continuations, JSON form, the last stage, RUN listed', () => {
    const plan = readDockerfile(
      [
        'FROM node:20 AS build',
        'COPY . /src',
        'FROM python:3.12',
        '# a comment',
        'WORKDIR /srv',
        'RUN apt-get update \\',
        '  && apt-get install -y jq',
        'COPY ["a b.txt", "c.txt", "./"]',
        'COPY --from=build /src/out /srv/out',
        'ADD --chown=1000 data /srv/data',
        'COPY tool /usr/local/bin/tool',
      ].join('\n'),
      '/app',
    );
    expect(plan.workdir).toBe('/srv');
    expect(plan.baseImages).toEqual(['node:20', 'python:3.12']);
    expect(plan.copies.map((c) => [c.sources, c.dest, c.destIsDir])).toEqual([
      [['a b.txt', 'c.txt'], '/srv', true],
      [['data'], '/srv/data', false],
      [['tool'], '/usr/local/bin/tool', false],
    ]);
    expect(plan.skipped[0]).toBe('RUN apt-get update && apt-get install -y jq');
    expect(plan.skipped[1]).toMatch(/--from=build.*another stage/);
  });
});

describe('task.toml env templates', () => {
  it('${VAR} and ${VAR:-default} come from the environment at run time; an unset one without a default is an error', () => {
    expect(resolveEnv({ A: 'literal', B: '${HB_TEST_SET}', C: '${HB_TEST_UNSET:-dflt}', D: 'x ${HB_TEST_SET}' }, 'post', { HB_TEST_SET: 'v' })).toEqual({
      A: 'literal',
      B: 'v',
      C: 'dflt',
      D: 'x ${HB_TEST_SET}',
    });
    expect(() => resolveEnv({ K: '${HB_TEST_UNSET}' }, 'post', {})).toThrow(/K from \$HB_TEST_UNSET, which is not set/);
  });
});

describe('Harbor network settings', () => {
  const settings = (network: 'proxy-only' | 'host'): SandboxSettings => ({
    kind: 'bwrap',
    bwrap: '/usr/bin/bwrap',
    network,
    limits: DEFAULT_LIMITS,
    extraReadOnly: [],
  });
  const byId = new Map(loadTasks(FIXTURES).map((t) => [t.id, t]));
  it("follows task.toml where it speaks, and the rollout's --network where it does not", () => {
    // allow_internet = true: the harness and the verifier get the host network.
    expect(harnessNetwork(settings('proxy-only'), byId.get('network-setup')!)).toBe('host');
    expect(verifierNetwork(settings('proxy-only'), byId.get('network-setup')!)).toBe('host');
    // allow_internet = false / network_mode = "no-network": never more than the proxy, even under --network host.
    for (const id of ['py-fix-median', 'js-fix-slugify']) {
      expect(harnessNetwork(settings('host'), byId.get(id)!)).toBe('proxy-only');
      expect(verifierNetwork(settings('host'), byId.get(id)!)).toBe('none');
    }
    // Silent: polar's default (proxy-only, a verifier without network), or Harbor's (public) with --network host.
    expect(harnessNetwork(settings('proxy-only'), byId.get('partial-credit')!)).toBe('proxy-only');
    expect(verifierNetwork(settings('proxy-only'), byId.get('partial-credit')!)).toBe('none');
    expect(harnessNetwork(settings('host'), byId.get('partial-credit')!)).toBe('host');
    expect(verifierNetwork(settings('host'), byId.get('partial-credit')!)).toBe('host');
  });
});

describe('.dockerignore', () => {
  it('leaves out what its patterns match, folders with their contents, and ! re-includes', () => {
    const patterns = ['*.log', 'build/', '**/__pycache__', 'secret?.txt', 'docs', '!docs/keep.md'];
    const cases: [string, boolean][] = [
      ['app.log', true],
      ['src/app.log', false],
      ['build/out.bin', true],
      ['src/pkg/__pycache__/m.pyc', true],
      ['__pycache__/x.pyc', true],
      ['secret1.txt', true],
      ['secret12.txt', false],
      ['docs/a.md', true],
      ['docs/keep.md', false],
      ['main.py', false],
    ];
    for (const [rel, ignored] of cases) expect(dockerIgnored(rel, patterns), rel).toBe(ignored);
  });

  it("a task's COPY . leaves out what its .dockerignore names", async () => {
    const root = dataset({
      t: {
        'task.toml': 'version = "1.0"\n',
        'instruction.md': 'x',
        'tests/test.sh': '',
        'environment/Dockerfile': 'FROM a\nWORKDIR /app\nCOPY . .\n',
        'environment/.dockerignore': '# generated\nDockerfile\n*.pyc\n',
        'environment/main.py': '',
        'environment/main.pyc': '',
        'environment/sub/x.pyc': '',
        'environment/sub/y.py': '',
      },
    });
    const [task] = readHarborTasks(path.join(root, 't'));
    const dest = path.join(root, 'ws');
    await buildStartingState(task!.harbor!, dest);
    const files = fs.readdirSync(dest, { recursive: true }).map(String).sort();
    // As in Docker, *.pyc matches at the context's top only.
    expect(files).toEqual(['.dockerignore', 'main.py', 'sub', 'sub/x.pyc', 'sub/y.py']);
  });
});

describe("Harbor's separate verifier environment in task.toml", () => {
  const task = (toml: string, extra: Record<string, string> = {}) => ({
    'task.toml': `schema_version = "1.3"\n${toml}`,
    'instruction.md': 'x',
    'environment/Dockerfile': 'FROM a\nWORKDIR /app\n',
    'tests/test.sh': '',
    ...extra,
  });
  const verifierImage = { 'tests/Dockerfile': 'FROM b\nWORKDIR /grade\nCOPY test.sh /tests/test.sh\n' };

  it('reads environment_mode, [verifier.environment], artifacts and [[verifier.collect]] into the trial', () => {
    const root = dataset({
      explicit: task(
        'artifacts = ["/tmp/answer.json", { source = "app/out", destination = "out", exclude = ["*.log"] }]\n' +
          '[verifier]\nenvironment_mode = "separate"\nnetwork_mode = "public"\n' +
          '[verifier.environment]\nnetwork_mode = "no-network"\ncpus = 2\nmemory_mb = 1024\n' +
          '[[verifier.collect]]\ncommand = "cp /app/state /tmp/answer.json"\n' +
          '[[verifier.collect]]\ncommand = "sync"\nservice = "main"\ntimeout_sec = 5\nuser = "agent"\n' +
          '[environment]\nnetwork_mode = "no-network"\ncpus = 1\n',
        verifierImage,
      ),
      implicit: task('[verifier.environment]\nnetwork_mode = "no-network"\n', verifierImage),
      inherited: task(
        '[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "org/img:1"\nworkdir = "/srv"\nallow_internet = false\nmemory_mb = 512\n',
      ),
      shared: task('[verifier]\nenvironment_mode = "shared"\n'),
      silent: task(''),
    });
    const t = Object.fromEntries(readHarborTasks(root).map((x) => [x.id, x.harbor!]));
    const tests = (id: string) => path.join(root, id, 'tests');
    expect(t.explicit).toMatchObject({
      verifierMode: 'separate',
      // [verifier].network_mode overrides the separate environment's own, as for the agent's.
      verifierNetwork: 'public',
      separateVerifier: {
        context: tests('explicit'),
        dockerfile: path.join(tests('explicit'), 'Dockerfile'),
        image: null,
        inherited: false,
        workdir: '/grade',
        network: 'public',
        cpus: 2,
        memoryBytes: 1024 * 1024 ** 2,
      },
      artifacts: [
        { source: '/tmp/answer.json', destination: null, exclude: [] },
        { source: '/app/out', destination: 'out', exclude: ['*.log'] },
      ],
      collect: [
        { command: 'cp /app/state /tmp/answer.json', timeoutSec: 60 },
        { command: 'sync', timeoutSec: 5, user: 'agent' },
      ],
    });
    // The agent's own network and resources stay [environment]'s.
    expect(t.explicit).toMatchObject({ agentNetwork: 'none', cpus: 1 });
    expect(t.implicit!.verifierMode).toBe('separate');
    expect(t.implicit!.verifierNetwork).toBe('none');
    // No [verifier.environment]: a copy of [environment], its image (prebuilt, so tests/Dockerfile is not needed), workdir and network.
    expect(t.inherited!.separateVerifier).toEqual({
      context: tests('inherited'),
      dockerfile: null,
      image: 'org/img:1',
      inherited: true,
      workdir: '/srv',
      network: 'none',
      memoryBytes: 512 * 1024 ** 2,
      // Inherited with the rest of [environment]: Harbor's default, config.py:325.
      buildTimeoutSec: 600,
    });
    expect(t.shared).toMatchObject({ verifierMode: 'shared', artifacts: [], collect: [] });
    expect(t.shared).not.toHaveProperty('separateVerifier');
    expect(t.silent!.verifierMode).toBeNull();
    expect(t.silent).not.toHaveProperty('separateVerifier');
    // What a separate verifier receives: /logs/artifacts first, unless an entry names it.
    expect(carriedPaths(t.explicit!).map((a) => a.source)).toEqual(['/logs/artifacts', '/tmp/answer.json', '/app/out']);
    expect(carriedPaths({ artifacts: [{ source: '/logs/artifacts/', destination: null, exclude: ['big'] }] })).toEqual([
      { source: '/logs/artifacts/', destination: null, exclude: ['big'] },
    ]);
    removeTree(root);
  });

  it('refuses malformed values with the file and the key, as Harbor would (or what polar cannot run)', () => {
    const root = dataset({
      mode: task('[verifier]\nenvironment_mode = "isolated"\n'),
      conflict: task('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n'),
      'env-table': task('[verifier]\nenvironment = 3\n'),
      'no-image': task('[verifier]\nenvironment_mode = "separate"\n'),
      'env-fields': task('[verifier.environment]\nmemory_mb = -1\nnetwork_mode = "loose"\nworkdir = "rel"\ndocker_image = 3\n', verifierImage),
      'artifacts-list': task('artifacts = "/tmp/x"\n'),
      artifacts: task(
        'artifacts = [1, "../etc/passwd", { source = "/a", destination = "/abs" }, { source = "/b", destination = "manifest.json" }, { source = "/c", exclude = "x" }, { source = "/d", colour = 1 }, { source = "e", service = "db" }, { destination = "x" }, { source = "/f", service = "no good" }]\n',
      ),
      'collect-table': task('[verifier]\ncollect = "dump"\n'),
      collect: task(
        '[[verifier.collect]]\ntimeout_sec = 1\n[[verifier.collect]]\ncommand = "x"\ntimeout_sec = -1\nuser = "a b"\n[[verifier.collect]]\ncommand = "x"\nservice = "postgres"\nwhen = "later"\n',
      ),
    });
    let message = '';
    try {
      readHarborTasks(root);
    } catch (err) {
      message = (err as Error).message;
    }
    for (const want of [
      /mode\/task\.toml, field "verifier\.environment_mode": "shared" or "separate"/,
      /conflict\/task\.toml, field "verifier\.environment": conflicts with environment_mode = "shared"/,
      /env-table\/task\.toml, field "verifier\.environment": a table/,
      /no-image\/tests\/Dockerfile: missing: a separate verifier's image is built from tests\//,
      /env-fields\/task\.toml, field "verifier\.environment\.memory_mb": a positive whole number/,
      /env-fields\/task\.toml, field "verifier\.environment\.network_mode": "public", "no-network" or "allowlist"/,
      /env-fields\/task\.toml, field "verifier\.environment\.workdir": an absolute path/,
      /env-fields\/task\.toml, field "verifier\.environment\.docker_image": an image name/,
      /artifacts-list\/task\.toml, field "artifacts": a list/,
      /artifacts\/task\.toml, field "artifacts\[0\]": a path, or a table/,
      /artifacts\/task\.toml, field "artifacts\[1\]\.source": must not contain "\.\."/,
      /artifacts\/task\.toml, field "artifacts\[2\]\.destination": a relative path/,
      /artifacts\/task\.toml, field "artifacts\[3\]\.destination": manifest\.json is reserved/,
      /artifacts\/task\.toml, field "artifacts\[4\]\.exclude": a list of strings/,
      /artifacts\/task\.toml, field "artifacts\[6\]\.source": an absolute path: it is taken from the compose service "db" \(config\.py:615-625\)/,
      /artifacts\/task\.toml, field "artifacts\[7\]\.source": a path in the agent's environment/,
      /artifacts\/task\.toml, field "artifacts\[8\]\.service": a compose service's name.*config\.py:22-32/,
      /collect-table\/task\.toml, field "verifier\.collect": an array of tables/,
      /collect\/task\.toml, field "verifier\.collect\[0\]\.command": a shell command \(required\)/,
      /collect\/task\.toml, field "verifier\.collect\[1\]\.timeout_sec": seconds/,
      /collect\/task\.toml, field "verifier\.collect\[1\]\.user": a user name or a uid/,
    ]) {
      expect(message).toMatch(want);
    }
    // Keys ArtifactConfig and VerifierCollectConfig do not define are ignored; a sidecar's hook loads.
    expect(message).not.toMatch(/colour|when|postgres/);
    removeTree(root);
  });
});
